# Shared by our Tcl tests (integration/fork-compat, fork-migrateslots):
# sorted sets filled on the server by Lua, 2,000 arguments per ZADD.
#
# EVAL $::fork_zfill_lua 1 key first last kind long fills `key` with
# members m:<first> .. m:<last>. `kind` picks the scores: 'ties' (i % 50000:
# members share scores and are ordered by name among equals; twenty share
# each at 1M) or 'spread' (exact eighths, negative and positive). long = n
# > 0 makes every n-th member longer than zset-max-listpack-value; 0 makes
# none. Returns the set's ZCARD.
set ::fork_zfill_lua {
    local key, first, last, kind, long = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
    local pad = ':' .. string.rep('L', 70)
    local batch = {}
    for i = first, last do
        if kind == 'ties' then
            batch[#batch + 1] = i % 50000
        else
            batch[#batch + 1] = (i * 7919 % 1000003) / 8 - 60000
        end
        local m = 'm:' .. i
        if long > 0 and i % long == 0 then m = m .. pad end
        batch[#batch + 1] = m
        if #batch == 2000 then
            redis.call('zadd', key, unpack(batch))
            batch = {}
        end
    end
    if #batch > 0 then redis.call('zadd', key, unpack(batch)) end
    return redis.call('zcard', key)
}

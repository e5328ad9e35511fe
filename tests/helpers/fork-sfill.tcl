# Shared by our Tcl tests of big sets (integration/fork-setcompat,
# unit/type/fork-set): sets filled on the server by Lua, 1,000 members per
# SADD.
#
# EVAL $::fork_sfill_lua 1 key kind seed count adds `count` members new to
# `key` and returns its SCARD. `kind` picks them: 'rand' (random integers in
# [0, 10^8) from Lua's generator seeded with `seed`, drawn until `count` are
# new), 'seq' (the integers seed, seed+1, ...) or 'str' (the first 24 hex
# characters of the SHA1 of "seed:i"; those made of digits alone are past
# the 64-bit range, so strings too). The same arguments give the same set on
# any server.
set ::fork_sfill_lua {
    local key, kind, seed, count = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
    math.randomseed(seed)
    local added, i = 0, 0
    while added < count do
        local batch = {}
        for j = 1, math.min(1000, count - added) do
            if kind == 'rand' then
                batch[j] = tostring(math.random(0, 99999999))
            elseif kind == 'seq' then
                batch[j] = string.format('%d', seed + i)
            else
                batch[j] = string.sub(redis.sha1hex(seed .. ':' .. i), 1, 24)
            end
            i = i + 1
        end
        added = added + redis.call('sadd', key, unpack(batch))
    end
    return redis.call('scard', key)
}

# EVAL $::fork_sorted_members_lua 1 key: a set's members in sorted order,
# hashed on the server (moving 100,000 members or more to the test client
# takes seconds). Only for printable members: Lua sorts through strcoll.
set ::fork_sorted_members_lua {
    local m = redis.call('smembers', KEYS[1])
    table.sort(m)
    local h = ''
    for i = 1, #m, 10000 do
        h = redis.sha1hex(h .. table.concat(m, '\n', i, math.min(i + 9999, #m)))
    end
    return h
}

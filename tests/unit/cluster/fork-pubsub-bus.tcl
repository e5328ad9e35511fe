# GHSA-f4q9-j22m-xqq9 (patches/security/): a node in cluster mode builds a
# cluster bus message for every PUBLISH and SPUBLISH, even with no other node
# to send it to. The bus carries a message's length in 32 bits; before the
# fix, a channel and message of 4 GiB or more wrapped that length, the block
# was allocated for the wrapped size and the whole message was copied into it
# (under ASan: heap-buffer-overflow in clusterCreatePublishMsgBlock; without
# it, a crash). The fix delivers such a message to the node's own subscribers
# only, and says so in the log.
#
# The message is streamed to the server in 1 MiB writes, so the test holds
# 4 GiB in the server (the argument is read into one buffer) and 1 MiB here:
# about 10 s on two cores, 30 s under ASan.

# Sends PUBLISH (or SPUBLISH) of a message of $len bytes ('x' repeated) on a
# connection of its own and returns the reply line.
proc fork_publish_streamed {cmd channel len} {
    set fd [socket [srv 0 host] [srv 0 port]]
    fconfigure $fd -translation binary -buffering full -buffersize 1048576
    puts -nonewline $fd "*3\r\n\$[string length $cmd]\r\n$cmd\r\n"
    puts -nonewline $fd "\$[string length $channel]\r\n$channel\r\n\$$len\r\n"
    set chunk [string repeat x 1048576]
    for {set left $len} {$left >= 1048576} {incr left -1048576} {
        puts -nonewline $fd $chunk
    }
    puts -nonewline $fd "[string repeat x $left]\r\n"
    flush $fd
    set reply [gets $fd]
    close $fd
    return $reply
}

start_server [list tags {"pubsub cluster external:skip singledb"} overrides [list \
        cluster-enabled yes cluster-port [find_available_port $::baseport $::portcount] \
        proto-max-bulk-len 5gb client-query-buffer-limit 5gb]] {
    test {PUBLISH of a 4 GiB message in cluster mode: delivered here, not sent on the bus, no overflow} {
        # A cluster of one node serving every slot, so that SPUBLISH runs too.
        r cluster addslotsrange 0 16383
        # No subscriber: one would be sent the 4 GiB again.
        assert_equal {:0} [string trim [fork_publish_streamed PUBLISH big [expr {1 << 32}]]]
        verify_log_message 0 "*PUBLISH of a 3-byte channel and a 4294967296-byte message not propagated*" 0
        assert_equal PONG [r ping]
        # Messages the bus can carry still go through the usual path.
        assert_equal 0 [r publish small hello]
        assert_equal 0 [r spublish small hello]
    }
}

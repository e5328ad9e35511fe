# DUMP payloads built by hand, for tests of corrupt ones: Valkey's CRC64,
# RDB lengths and strings, and the footer (RDB version, checksum) that
# makes the server's loader, not its checksum, judge a payload.

set ::fs_crc64_table {}
for {set i 0} {$i < 256} {incr i} {
    set crc $i
    for {set j 0} {$j < 8} {incr j} {
        set crc [expr {$crc & 1 ? ($crc >> 1) ^ 0x95ac9329ac4bc9b5 : $crc >> 1}]
    }
    lappend ::fs_crc64_table $crc
}

# Valkey's CRC64 (Jones, reflected, initial 0).
proc fs_crc64 {data} {
    binary scan $data cu* bytes
    set crc 0
    foreach b $bytes {
        set crc [expr {[lindex $::fs_crc64_table [expr {($crc ^ $b) & 0xff}]] ^ ($crc >> 8)}]
    }
    return $crc
}

# An RDB length.
proc fs_rdb_len {n} {
    if {$n < 64} { return [binary format c $n] }
    if {$n < 16384} { return [binary format cc [expr {0x40 | ($n >> 8)}] [expr {$n & 0xff}]] }
    if {$n < 4294967296} { return [binary format cI 0x80 $n] }
    return [binary format cW 0x81 $n]
}

# Closes a payload's body with the version and a correct checksum.
proc fs_close_payload {body version} {
    set body $body[binary format s $version]
    return $body[binary format w [fs_crc64 $body]]
}

# A raw (not integer-encoded) RDB string.
proc fs_raw_string {s} { return [fs_rdb_len [string length $s]]$s }

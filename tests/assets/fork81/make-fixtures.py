#!/usr/bin/env python3
# How fork81.rdb and fork81-aof/ were made: data written by the fork's last
# build on Valkey 8.1.1 (commit 59ad8c1), kept so that the suite can check
# that our users' files load into the build on the newer upstream with the
# same data (integration/fork-upgrade). Run against that build, started as
#   valkey-server --port P --dir D --appendonly yes --appendfilename fork81.aof \
#     --appenddirname fork81-aof --aof-use-rdb-preamble no \
#     --dbfilename fork81.rdb --save "" --enable-debug-command yes
# then: make-fixtures.py P CLI; valkey-cli BGREWRITEAOF; four writes after
# the rewrite (ZADD big:z1 42 after-rewrite, ZINCRBY big:z1 5 m:1:x,
# ZREM big:z0 top, ZADD small:z0 7 lp-after), so that the AOF has a base and
# an incremental part; SAVE. DEBUG DIGEST of that server:
# fb0598657e9a45b2aef9f68e9d354cbceb0279ca
import random, subprocess, sys
port, cli = sys.argv[1], sys.argv[2]
random.seed(81)
cmds=[]
def c(*a): cmds.append(a)
# big sorted sets (btree), with integer-looking, long and short members, equal scores, infinities
for k in range(2):
    key=f"big:z{k}"
    for i in range(0,2000,200):
        args=["ZADD",key]
        for j in range(i,i+200):
            m = str(j) if j%7==0 else ("m:%d:%s"%(j,"x"*(j%37)))
            s = random.choice([random.random()*1e6, j, -j, 0, 1.5])
            args+=[repr(float(s)), m]
        c(*args)
c("ZADD","big:z0","inf","top","-inf","bottom")
# a set over the listpack value limit (long member)
c("ZADD","big:long","1","a"*100,"2","b")
# small listpack sets
for k in range(20):
    args=["ZADD",f"small:z{k}"]
    for j in range(random.randint(1,100)):
        args+=[str(random.randint(-1000,1000)), f"e{j}"]
    c(*args)
# geo
c("GEOADD","geo:big",*sum(([str(random.uniform(-179,179)),str(random.uniform(-84,84)),f"p{i}"] for i in range(300)),[]))
c("GEOADD","geo:small","13.361389","38.115556","Palermo","15.087269","37.502669","Catania")
# other types
for i in range(50): c("SET",f"s:{i}","v"*i)
c("HSET","h:1",*sum(([f"f{i}",str(i)] for i in range(300)),[]))
c("RPUSH","l:1",*[str(i) for i in range(500)])
c("SADD","set:int",*[str(i) for i in range(1000)])
c("SADD","set:str",*[f"m{i}" for i in range(300)])
c("XADD","st:1","*","a","1")
c("SET","exp:1","x","PX","99999999999")
c("ZADD","big:exp",*sum(([str(i),f"x{i}"] for i in range(300)),[]))
c("PEXPIRE","big:exp","99999999999")
def resp(a):
    out=b"*%d\r\n"%len(a)
    for x in a:
        x=x.encode() if isinstance(x,str) else x
        out+=b"$%d\r\n%s\r\n"%(len(x),x)
    return out
data=b"".join(resp(a) for a in cmds)
subprocess.run([cli,"-p",port,"--pipe"],input=data,check=True,stdout=subprocess.DEVNULL)

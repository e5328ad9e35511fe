/* A test module of this fork: walks sorted-set ranges with the module API's
 * iterators (ValkeyModule_Zset{First,Last}In{Score,Lex}Range, RangeNext,
 * RangePrev), so that tests can compare every walk with ZRANGEBYSCORE and
 * ZRANGEBYLEX on both encodings.
 *
 * FORKZ.SCORE key min max minex maxex FWD|REV
 * FORKZ.LEX key min max FWD|REV
 *
 * FWD starts at the first entry of the range and steps with RangeNext, REV
 * at the last and steps with RangePrev. The reply: member, score, member,
 * score, ... then the member the iterator still points at after the end was
 * reached (or nil), which must be the last one walked.
 *
 * And walks that change the set under the iterator, as a module may (the
 * API does not forbid it, and upstream's skiplist iterators survive it):
 *
 * FORKZ.WALKDEL key SCORE|LEX FWD|REV
 *     walks the whole set and, after each step, removes the member it just
 *     left (then the last one); replies with the number removed.
 * FORKZ.GROW key n STOP|CLOSE|WALK
 *     starts a score range over the whole set, adds n members (scores
 *     1000000 + i, members "grow:<i>") through the key, then stops and
 *     closes (STOP), closes without stopping (CLOSE), or walks on to the
 *     end and replies with the members walked, the first included (WALK).
 * FORKZ.DRAIN key
 *     walks the set removing each current member, which empties and deletes
 *     the key under the iterator, then closes without stopping; replies
 *     with the number removed. */

#include "valkeymodule.h"

#include <strings.h>

static int walk(ValkeyModuleCtx *ctx, ValkeyModuleKey *key, int reverse) {
    long n = 0;
    ValkeyModuleString *last = NULL;
    ValkeyModule_ReplyWithArray(ctx, VALKEYMODULE_POSTPONED_LEN);
    while (!ValkeyModule_ZsetRangeEndReached(key)) {
        double score;
        ValkeyModuleString *ele = ValkeyModule_ZsetRangeCurrentElement(key, &score);
        if (ele == NULL) break;
        ValkeyModule_ReplyWithString(ctx, ele);
        ValkeyModule_ReplyWithDouble(ctx, score);
        n += 2;
        last = ele;
        if (!(reverse ? ValkeyModule_ZsetRangePrev(key) : ValkeyModule_ZsetRangeNext(key))) break;
    }
    /* After the end: the iterator stays on the last entry walked. */
    ValkeyModuleString *now = ValkeyModule_ZsetRangeCurrentElement(key, NULL);
    if (now && last && ValkeyModule_StringCompare(now, last) == 0)
        ValkeyModule_ReplyWithSimpleString(ctx, "stayed");
    else if (now == NULL && last == NULL)
        ValkeyModule_ReplyWithNull(ctx);
    else
        ValkeyModule_ReplyWithSimpleString(ctx, "moved");
    n++;
    ValkeyModule_ReplySetArrayLength(ctx, n);
    ValkeyModule_ZsetRangeStop(key);
    return VALKEYMODULE_OK;
}

static int isReverse(ValkeyModuleString *s) {
    return strcasecmp(ValkeyModule_StringPtrLen(s, NULL), "rev") == 0;
}

static int forkzScore(ValkeyModuleCtx *ctx, ValkeyModuleString **argv, int argc) {
    if (argc != 7) return ValkeyModule_WrongArity(ctx);
    ValkeyModule_AutoMemory(ctx);
    ValkeyModuleKey *key = ValkeyModule_OpenKey(ctx, argv[1], VALKEYMODULE_READ);
    if (key == NULL) return ValkeyModule_ReplyWithError(ctx, "ERR no sorted set");
    double min, max;
    long long minex, maxex;
    if (ValkeyModule_StringToDouble(argv[2], &min) != VALKEYMODULE_OK ||
        ValkeyModule_StringToDouble(argv[3], &max) != VALKEYMODULE_OK ||
        ValkeyModule_StringToLongLong(argv[4], &minex) != VALKEYMODULE_OK ||
        ValkeyModule_StringToLongLong(argv[5], &maxex) != VALKEYMODULE_OK)
        return ValkeyModule_ReplyWithError(ctx, "ERR bad range");
    int reverse = isReverse(argv[6]);
    int ret = reverse ? ValkeyModule_ZsetLastInScoreRange(key, min, max, minex, maxex)
                      : ValkeyModule_ZsetFirstInScoreRange(key, min, max, minex, maxex);
    if (ret != VALKEYMODULE_OK) return ValkeyModule_ReplyWithError(ctx, "ERR no sorted set");
    return walk(ctx, key, reverse);
}

static int forkzLex(ValkeyModuleCtx *ctx, ValkeyModuleString **argv, int argc) {
    if (argc != 5) return ValkeyModule_WrongArity(ctx);
    ValkeyModule_AutoMemory(ctx);
    ValkeyModuleKey *key = ValkeyModule_OpenKey(ctx, argv[1], VALKEYMODULE_READ);
    if (key == NULL) return ValkeyModule_ReplyWithError(ctx, "ERR no sorted set");
    int reverse = isReverse(argv[4]);
    int ret = reverse ? ValkeyModule_ZsetLastInLexRange(key, argv[2], argv[3])
                      : ValkeyModule_ZsetFirstInLexRange(key, argv[2], argv[3]);
    if (ret != VALKEYMODULE_OK) return ValkeyModule_ReplyWithError(ctx, "ERR no sorted set or bad range");
    return walk(ctx, key, reverse);
}

static int forkzWalkDel(ValkeyModuleCtx *ctx, ValkeyModuleString **argv, int argc) {
    if (argc != 4) return ValkeyModule_WrongArity(ctx);
    ValkeyModule_AutoMemory(ctx);
    ValkeyModuleKey *key = ValkeyModule_OpenKey(ctx, argv[1], VALKEYMODULE_READ | VALKEYMODULE_WRITE);
    int lex = strcasecmp(ValkeyModule_StringPtrLen(argv[2], NULL), "lex") == 0;
    int reverse = isReverse(argv[3]);
    ValkeyModuleString *lo = ValkeyModule_CreateString(ctx, "-", 1), *hi = ValkeyModule_CreateString(ctx, "+", 1);
    int ret;
    if (lex) ret = reverse ? ValkeyModule_ZsetLastInLexRange(key, lo, hi) : ValkeyModule_ZsetFirstInLexRange(key, lo, hi);
    else ret = reverse ? ValkeyModule_ZsetLastInScoreRange(key, VALKEYMODULE_NEGATIVE_INFINITE, VALKEYMODULE_POSITIVE_INFINITE, 0, 0)
                       : ValkeyModule_ZsetFirstInScoreRange(key, VALKEYMODULE_NEGATIVE_INFINITE, VALKEYMODULE_POSITIVE_INFINITE, 0, 0);
    if (ret != VALKEYMODULE_OK) return ValkeyModule_ReplyWithError(ctx, "ERR no sorted set");
    long long removed = 0;
    while (!ValkeyModule_ZsetRangeEndReached(key)) {
        ValkeyModuleString *left = ValkeyModule_ZsetRangeCurrentElement(key, NULL);
        if (left == NULL) break;
        int more = reverse ? ValkeyModule_ZsetRangePrev(key) : ValkeyModule_ZsetRangeNext(key);
        int deleted = 0;
        ValkeyModule_ZsetRem(key, left, &deleted);
        removed += deleted;
        if (!more) break;
    }
    ValkeyModule_ZsetRangeStop(key);
    ValkeyModule_CloseKey(key);
    return ValkeyModule_ReplyWithLongLong(ctx, removed);
}

static int forkzGrow(ValkeyModuleCtx *ctx, ValkeyModuleString **argv, int argc) {
    if (argc != 4) return ValkeyModule_WrongArity(ctx);
    ValkeyModule_AutoMemory(ctx);
    long long n;
    if (ValkeyModule_StringToLongLong(argv[2], &n) != VALKEYMODULE_OK) return ValkeyModule_ReplyWithError(ctx, "ERR n");
    const char *how = ValkeyModule_StringPtrLen(argv[3], NULL);
    ValkeyModuleKey *key = ValkeyModule_OpenKey(ctx, argv[1], VALKEYMODULE_READ | VALKEYMODULE_WRITE);
    if (ValkeyModule_ZsetFirstInScoreRange(key, VALKEYMODULE_NEGATIVE_INFINITE, VALKEYMODULE_POSITIVE_INFINITE, 0, 0) !=
        VALKEYMODULE_OK)
        return ValkeyModule_ReplyWithError(ctx, "ERR no sorted set");
    ValkeyModuleString *first = ValkeyModule_ZsetRangeCurrentElement(key, NULL);
    for (long long i = 0; i < n; i++) {
        ValkeyModuleString *m = ValkeyModule_CreateStringPrintf(ctx, "grow:%lld", i);
        ValkeyModule_ZsetAdd(key, 1000000.0 + (double)i, m, NULL);
    }
    if (!strcasecmp(how, "stop")) {
        ValkeyModule_ZsetRangeStop(key);
        ValkeyModule_CloseKey(key);
        return ValkeyModule_ReplyWithSimpleString(ctx, "OK");
    }
    if (!strcasecmp(how, "close")) {
        ValkeyModule_CloseKey(key);
        return ValkeyModule_ReplyWithSimpleString(ctx, "OK");
    }
    long len = 0;
    ValkeyModule_ReplyWithArray(ctx, VALKEYMODULE_POSTPONED_LEN);
    if (first) ValkeyModule_ReplyWithString(ctx, first), len++;
    while (ValkeyModule_ZsetRangeNext(key)) {
        ValkeyModule_ReplyWithString(ctx, ValkeyModule_ZsetRangeCurrentElement(key, NULL));
        len++;
    }
    ValkeyModule_ReplySetArrayLength(ctx, len);
    ValkeyModule_ZsetRangeStop(key);
    ValkeyModule_CloseKey(key);
    return VALKEYMODULE_OK;
}

static int forkzDrain(ValkeyModuleCtx *ctx, ValkeyModuleString **argv, int argc) {
    if (argc != 2) return ValkeyModule_WrongArity(ctx);
    ValkeyModule_AutoMemory(ctx);
    ValkeyModuleKey *key = ValkeyModule_OpenKey(ctx, argv[1], VALKEYMODULE_READ | VALKEYMODULE_WRITE);
    if (ValkeyModule_ZsetFirstInScoreRange(key, VALKEYMODULE_NEGATIVE_INFINITE, VALKEYMODULE_POSITIVE_INFINITE, 0, 0) !=
        VALKEYMODULE_OK)
        return ValkeyModule_ReplyWithError(ctx, "ERR no sorted set");
    long long removed = 0;
    for (;;) {
        ValkeyModuleString *cur = ValkeyModule_ZsetRangeCurrentElement(key, NULL);
        if (cur == NULL) break;
        int deleted = 0;
        ValkeyModule_ZsetRem(key, cur, &deleted);
        removed += deleted;
        if (!ValkeyModule_ZsetRangeNext(key)) break;
    }
    ValkeyModule_CloseKey(key);
    return ValkeyModule_ReplyWithLongLong(ctx, removed);
}

int ValkeyModule_OnLoad(ValkeyModuleCtx *ctx, ValkeyModuleString **argv, int argc) {
    VALKEYMODULE_NOT_USED(argv);
    VALKEYMODULE_NOT_USED(argc);
    if (ValkeyModule_Init(ctx, "forkzrange", 1, VALKEYMODULE_APIVER_1) == VALKEYMODULE_ERR) return VALKEYMODULE_ERR;
    if (ValkeyModule_CreateCommand(ctx, "forkz.score", forkzScore, "readonly", 1, 1, 1) == VALKEYMODULE_ERR)
        return VALKEYMODULE_ERR;
    if (ValkeyModule_CreateCommand(ctx, "forkz.lex", forkzLex, "readonly", 1, 1, 1) == VALKEYMODULE_ERR)
        return VALKEYMODULE_ERR;
    if (ValkeyModule_CreateCommand(ctx, "forkz.walkdel", forkzWalkDel, "write", 1, 1, 1) == VALKEYMODULE_ERR)
        return VALKEYMODULE_ERR;
    if (ValkeyModule_CreateCommand(ctx, "forkz.grow", forkzGrow, "write", 1, 1, 1) == VALKEYMODULE_ERR)
        return VALKEYMODULE_ERR;
    if (ValkeyModule_CreateCommand(ctx, "forkz.drain", forkzDrain, "write", 1, 1, 1) == VALKEYMODULE_ERR)
        return VALKEYMODULE_ERR;
    return VALKEYMODULE_OK;
}

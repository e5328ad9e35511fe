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
 * reached (or nil), which must be the last one walked. */

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

int ValkeyModule_OnLoad(ValkeyModuleCtx *ctx, ValkeyModuleString **argv, int argc) {
    VALKEYMODULE_NOT_USED(argv);
    VALKEYMODULE_NOT_USED(argc);
    if (ValkeyModule_Init(ctx, "forkzrange", 1, VALKEYMODULE_APIVER_1) == VALKEYMODULE_ERR) return VALKEYMODULE_ERR;
    if (ValkeyModule_CreateCommand(ctx, "forkz.score", forkzScore, "readonly", 1, 1, 1) == VALKEYMODULE_ERR)
        return VALKEYMODULE_ERR;
    if (ValkeyModule_CreateCommand(ctx, "forkz.lex", forkzLex, "readonly", 1, 1, 1) == VALKEYMODULE_ERR)
        return VALKEYMODULE_ERR;
    return VALKEYMODULE_OK;
}

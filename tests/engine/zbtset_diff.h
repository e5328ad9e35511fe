/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Differential testing of keyed trees (zbtCreateKeyed: the members of a big
 * set) against a model that cannot be wrong in interesting ways: a sorted
 * array of (key, member), searched by bisection, where a member's key is
 * computed here from the seeded siphash, not taken from the engine. A
 * stream of bytes drives both, one operation at a time, and every result
 * is compared: found or not, the member's bytes, its key, its rank, the
 * entries a cursor walks to, the members a scan step returns. The cmocka
 * tests (test_zbtset.c) feed it bytes from a seeded generator, the libFuzzer
 * target (fuzz_zbtset.c) its inputs.
 *
 * A scan runs across the other operations: each step's batch must be the
 * model's entries from the cursor's key up to the returned one, and when it
 * ends, every member present since it began must have been returned once.
 *
 * Keys are ZBT_KEY_BITS wide, so members that share one are few among
 * random ones, and long runs of one key never form: zsColliders below lists
 * groups of members whose keys collide (for the seed zsSeed), which the
 * driver inserts and deletes so that runs of equal keys, ordered by member
 * bytes, lie inside leaves and across them.
 *
 * zsStep() returns NULL, or what differed.
 */
#ifndef ZBTSET_DIFF_H
#define ZBTSET_DIFF_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbtree.h"
#include "zmalloc.h"

uint64_t siphash(const uint8_t *in, const size_t inlen, const uint8_t *k);

/* The hash seed of every keyed test (the collision table holds for it). */
static const uint8_t zsSeed[16] = {'z', 'b', 't', 's', 'e', 't', ' ', 'u', 'n', 'i', 't', ' ', 't', 'e', 's', 't'};

/* A member's key as the model computes it: the top ZBT_KEY_BITS of its
 * hash. */
static double zsKey(const unsigned char *m, size_t len) {
    return (double)(siphash(m, len, zsSeed) >> (64 - ZBT_KEY_BITS));
}

/* --- Members whose keys collide --- */

/* Member i of the search that found the collisions: "c<i>", padded to one
 * of eight lengths (two of them out of line) picked by i's Fibonacci hash.
 * tests/engine/zbtset_collide.c names them the same way. */
static size_t zsColliderName(uint32_t i, unsigned char *buf) {
    static const int lens[8] = {0, 24, 30, 31, 64, 65, 90, 200};
    int n = snprintf((char *)buf, 16, "c%u", i);
    int len = lens[(uint32_t)(i * 2654435761u) >> 29];
    for (int j = n; j < len; j++) buf[j] = (unsigned char)"-=+."[(i + (uint32_t)j) & 3];
    return (size_t)(len > n ? len : n);
}

/* Groups of members with one key each, as "size, i...", for keys of
 * ZS_COLLIDER_BITS bits (so for fewer bits too): the eight largest groups
 * among 2^27 candidates (25 to 28 members: runs over several leaves), then
 * 40 groups each of eight, five and three members and 60 of two. Made by
 * `zbtset_collide 24 27`; run it again if the key function or the seed
 * changes (the tests check every group). */
#define ZS_COLLIDER_BITS 24
_Static_assert(ZBT_KEY_BITS <= ZS_COLLIDER_BITS, "keys grew: regenerate zsColliders with zbtset_collide");

static const uint32_t zsColliders[] = {
    28, 3813430, 5034749, 20487735, 22703222, 25591223, 36552007, 50623448, 60176083, 66389083, 68044425,
    70717842, 73787747, 78903980, 80158382, 82823149, 82928000, 85255785, 85717258, 89575035, 95740806,
    98419209, 102311986, 102866189, 104787016, 111709047, 115102883, 123862811, 124436668, 26, 1299775,
    7965106, 11762562, 18357147, 19985765, 37154394, 42487186, 51071767, 52902729, 57526564, 59342856,
    59706873, 61808824, 67879496, 68442857, 75419836, 84819394, 84999641, 114982801, 118894058, 122426653,
    123458375, 124620030, 127831256, 128728466, 132679812, 26, 11399837, 12129776, 18395480, 20000524,
    23880896, 30912681, 31747926, 33114613, 36062824, 43667538, 49003716, 51630422, 60135091, 82531322,
    82672895, 83025927, 85385426, 94931572, 99896309, 103103354, 105207100, 115876289, 116407456, 128636313,
    129319652, 132483843, 26, 992152, 3644901, 7880244, 23016611, 25708101, 28911312, 37558989, 50458820,
    50837794, 54345310, 60972594, 62941043, 67314643, 68180183, 88351925, 102765243, 105311783, 108411445,
    109394346, 110314409, 112525290, 113156238, 113793618, 127505810, 129729744, 133525737, 25, 1065535,
    23960840, 26107460, 34384699, 37564845, 39519056, 44551702, 49359140, 56606750, 57791168, 58381143,
    60691124, 62730319, 64668681, 80285608, 89298665, 91081809, 93313528, 98180849, 101823297, 103556578,
    108851989, 114198285, 115103491, 123506327, 25, 1665793, 18913450, 22447724, 23575967, 24712031, 25264954,
    27511316, 34338901, 35476544, 38235911, 45027367, 50770634, 60362063, 61080320, 73747089, 81269658,
    86959866, 95533791, 103691687, 107962580, 111752368, 113484539, 126244740, 128538809, 130236042, 25,
    2199939, 10310339, 14050745, 16839015, 17240192, 17287084, 20708614, 34566614, 54774041, 64408054,
    64684974, 64849533, 68185248, 75358604, 80659479, 86202690, 87091824, 88023992, 98378979, 103588210,
    109871908, 119977693, 128010752, 128034299, 132517396, 25, 487946, 4006633, 8294683, 14120460, 18368632,
    19840119, 20415929, 26435706, 32610218, 46045010, 47253603, 48275866, 49332346, 53138427, 60398679,
    67743878, 70976434, 76544834, 77366103, 88238373, 88888115, 92599354, 111098211, 114411157, 126066915, 8,
    1032418, 33602136, 56451747, 73678360, 94000880, 117026512, 129976835, 132440990, 8, 33436449, 42504723,
    43078014, 76463555, 90561394, 93841218, 101366180, 105732078, 8, 6104892, 12876914, 42632982, 44676687,
    45814911, 60338746, 120325857, 123534512, 8, 6778436, 15949956, 42855571, 61613904, 99116117, 106386054,
    111037838, 121672252, 8, 10968884, 20585268, 45929229, 46317420, 62143608, 86623945, 107933360, 122226821,
    8, 2379021, 9370678, 36710805, 38322790, 41699183, 89273159, 103730938, 123109710, 8, 30284142, 58934931,
    60663642, 61824539, 89119946, 102443557, 106238306, 122736311, 8, 45344285, 45878891, 80328895, 91637381,
    93194694, 102297412, 112883834, 132536687, 8, 998628, 23362645, 27584131, 64115422, 75019059, 82460345,
    86442979, 117703793, 8, 7948252, 30621411, 33044753, 34967892, 44821972, 76410868, 86554647, 126204741, 8,
    11199239, 22092419, 49162210, 59323930, 91585058, 101016691, 101979602, 120304714, 8, 20371251, 62780696,
    62939925, 91186873, 94741515, 96679335, 102180179, 103439521, 8, 27807412, 45550874, 72686017, 86907721,
    101098922, 102586813, 112381560, 120094731, 8, 1678876, 3313206, 14515818, 38488771, 86030538, 88912106,
    110397229, 121356534, 8, 8734426, 56658098, 62070722, 74369972, 83281359, 84478772, 105384291, 120290130,
    8, 59805425, 63605014, 70282731, 73044911, 74427851, 75417214, 77931400, 89406702, 8, 28174298, 37467893,
    82731855, 87397832, 109670352, 113549849, 122227722, 126867340, 8, 7005233, 32100993, 59430152, 83478306,
    103287701, 111205201, 115340507, 130492202, 8, 11594103, 19244888, 61885925, 74627345, 107091830,
    111763146, 117136595, 126964777, 8, 1474720, 13949035, 25971921, 34524695, 35664797, 75515215, 102393732,
    117134170, 8, 18311908, 18470865, 44326718, 48241449, 79213258, 111693767, 112646977, 126619571, 8,
    38192946, 83753535, 104453884, 108120829, 110466048, 110591925, 125870243, 127012794, 8, 16040169,
    24812340, 25289812, 41980658, 66246239, 74510244, 91177676, 119627572, 8, 32984795, 41146942, 46067332,
    56558387, 81593382, 85755747, 110017460, 124347229, 8, 844046, 27598464, 65987196, 93298945, 102184475,
    122204716, 125490555, 126891066, 8, 6921134, 8248211, 10671901, 31408234, 33107150, 63399915, 103470147,
    105239233, 8, 2154300, 40343589, 67452754, 84258919, 90366742, 99121670, 126171085, 132671918, 8,
    21481868, 24185894, 36482937, 60598917, 61727344, 81577646, 81588554, 118325728, 8, 1349940, 32998322,
    51795099, 65308678, 70141988, 73310102, 110062870, 122444970, 8, 19987514, 33102124, 80136909, 91501921,
    108346608, 109755303, 110157855, 131671596, 8, 1492009, 7245807, 7647865, 18175116, 20021811, 25702221,
    29971629, 113086525, 8, 19980257, 30177556, 39381933, 73759041, 85765983, 93929514, 104359263, 123921241,
    8, 9478636, 12825994, 16325555, 69270170, 77385422, 97164937, 101947649, 112853264, 8, 12813726, 13501846,
    26843721, 43750364, 67910592, 107286424, 113058186, 125373587, 8, 14197226, 19404956, 48820123, 56264463,
    64376804, 101496473, 124586622, 130340747, 8, 11405336, 16379898, 23876749, 82518563, 89759396, 95951929,
    102259829, 117966362, 8, 19673492, 29840330, 31481761, 31671040, 41760222, 80372268, 109588215, 112240065,
    8, 30607657, 34359729, 41729639, 52573541, 56589850, 63317108, 92497774, 99269298, 8, 5223751, 10573281,
    24570499, 37095672, 38907271, 88287617, 92719453, 104160560, 8, 21251294, 33195573, 48527033, 80856404,
    95878710, 96398391, 101334095, 122937671, 5, 39605571, 44248480, 51321219, 120429884, 128249925, 5,
    16946208, 57944751, 76989605, 83001265, 110706994, 5, 42288545, 65684882, 96204810, 102201860, 115291777,
    5, 74586075, 103583743, 118703342, 125745293, 132773911, 5, 42173222, 44771326, 61925584, 76007573,
    90751778, 5, 18303966, 46946972, 52201108, 109550605, 110876269, 5, 7542076, 32075928, 41223752, 64346795,
    97942878, 5, 723892, 20922938, 35513707, 38026906, 80737379, 5, 13063694, 35377009, 71482712, 101829052,
    114746338, 5, 21057643, 48159569, 64189106, 115524858, 132135047, 5, 37240995, 56216986, 79295185,
    97969880, 112232927, 5, 12834617, 47600415, 57212030, 106973697, 114379346, 5, 29399912, 66102591,
    72418627, 82225545, 134083050, 5, 17117502, 21555321, 35997146, 82077831, 99507775, 5, 15691740, 45227308,
    89055804, 129409945, 133481226, 5, 10548680, 25877504, 45019622, 64108832, 101927205, 5, 6099783,
    36914394, 51297042, 62347944, 94721283, 5, 5755647, 6922100, 55307124, 87840949, 114714884, 5, 1567461,
    5551003, 18052813, 48813172, 81382394, 5, 4824787, 35779936, 62592426, 96798950, 113744593, 5, 37754950,
    67261154, 75879768, 81649057, 110011799, 5, 12748720, 49523064, 63966204, 88832017, 96422331, 5, 62821032,
    86355381, 97438908, 103852458, 130520957, 5, 8252676, 76044446, 103713061, 117713572, 128935763, 5,
    40130931, 50881312, 54118810, 97865950, 108343852, 5, 39506732, 61430461, 64259813, 103267511, 116031920,
    5, 12445346, 46442186, 72774562, 94893555, 110613498, 5, 67854079, 96048285, 98293097, 119611582,
    127022442, 5, 13161732, 28207854, 52363394, 69806818, 106017965, 5, 30596615, 31153500, 31622098,
    34790770, 81284555, 5, 7368953, 22086226, 35547169, 38374876, 47425672, 5, 44376199, 55853255, 81671131,
    97385267, 120734874, 5, 4083927, 16440437, 65055854, 93312699, 121917215, 5, 44538952, 89563589, 96907449,
    101811063, 126880131, 5, 3468688, 42296295, 44339481, 65857809, 87855361, 5, 16684, 16233958, 73220488,
    79325830, 104576023, 5, 35789051, 53836862, 93669920, 116884918, 128167433, 5, 18065179, 20156208,
    42732072, 77181343, 110887801, 5, 8595100, 38121611, 47934029, 108018265, 112169575, 5, 5763874, 56389400,
    61165897, 82258816, 114009527, 3, 4853863, 33818890, 102398345, 3, 38344615, 52135966, 77339680, 3,
    43421018, 66041618, 72115524, 3, 94024, 87116411, 93543989, 3, 21818392, 57557484, 83761809, 3, 61287681,
    89311570, 95544291, 3, 6603697, 43261827, 60434546, 3, 25499094, 47842521, 115391157, 3, 14249837,
    38380571, 132874420, 3, 11478896, 27273419, 90011912, 3, 17155740, 22956812, 48245090, 3, 13046935,
    70883853, 74689809, 3, 10753640, 19134975, 47012225, 3, 27263139, 119416513, 124153683, 3, 3672863,
    91496088, 119370680, 3, 66641204, 76642084, 84180685, 3, 10769811, 42185309, 78934351, 3, 12155533,
    51606232, 122836769, 3, 8527274, 46263512, 111754755, 3, 34223487, 50937858, 62972665, 3, 28655587,
    40650343, 98482398, 3, 19940303, 32299992, 56273134, 3, 20176882, 24832229, 75025835, 3, 40073077,
    73328773, 102536572, 3, 9156776, 20671385, 72275260, 3, 26193234, 107756759, 123198796, 3, 28829125,
    35994155, 75030991, 3, 22082257, 99565575, 102829455, 3, 62954268, 88323187, 121194887, 3, 43498869,
    75283179, 120005240, 3, 66158690, 114749091, 127674671, 3, 17393563, 45264077, 129666717, 3, 52182968,
    52616015, 112157269, 3, 64106295, 109867442, 120783321, 3, 21926204, 55881382, 77616409, 3, 66511408,
    76630229, 113489491, 3, 7561214, 8767833, 85202582, 3, 12977977, 38688380, 103135076, 3, 87171519,
    101732211, 131669384, 3, 34412064, 82869670, 118484507, 2, 9315101, 78686216, 2, 71580343, 110323495, 2,
    42719515, 72802375, 2, 93924327, 122753828, 2, 6152447, 105256040, 2, 52120730, 74463800, 2, 12609440,
    85048234, 2, 114362074, 119074255, 2, 95590417, 126103417, 2, 116216124, 117709710, 2, 62175043,
    122873952, 2, 20944000, 37587055, 2, 17283194, 23628539, 2, 64387374, 88008303, 2, 27302063, 94083767, 2,
    7720808, 22823552, 2, 80647303, 97186029, 2, 15332309, 61429738, 2, 4923290, 66288016, 2, 14770448,
    68535728, 2, 76354580, 100170478, 2, 62277428, 124840968, 2, 68507958, 101543972, 2, 4314854, 54442317, 2,
    460405, 57231191, 2, 32016930, 97486823, 2, 23035767, 50378946, 2, 92591424, 119605896, 2, 42369970,
    117761321, 2, 61767291, 129075827, 2, 50189842, 110204979, 2, 3806086, 49109860, 2, 62287950, 109708212,
    2, 1155102, 106311211, 2, 25759330, 126408699, 2, 21021003, 44009908, 2, 69387628, 88132947, 2, 55526064,
    103150312, 2, 17702897, 96116266, 2, 10626709, 104871289, 2, 58378363, 133704706, 2, 16895398, 103280668,
    2, 4686076, 54713239, 2, 20432414, 105275227, 2, 35100846, 94038095, 2, 20419765, 118847783, 2, 21051955,
    88510943, 2, 2008885, 17037351, 2, 90236975, 109856933, 2, 12081659, 15006806, 2, 33905861, 81105305, 2,
    50351009, 66789921, 2, 50279444, 124152257, 2, 12847805, 18727385, 2, 11627424, 41217235, 2, 77131041,
    120224434, 2, 88742782, 111413992, 2, 12234609, 89088354, 2, 75307529, 75688387, 2, 4529390, 28052184,
    0};

typedef struct zsGroups {
    uint32_t start[300], size[300]; /* Index of a group's first member in zsColliders. */
    int n;
} zsGroups;

static const zsGroups *zsGetGroups(void) {
    static zsGroups g;
    if (g.n) return &g;
    for (uint32_t i = 0; zsColliders[i] && g.n < 300; i += zsColliders[i] + 1) {
        g.start[g.n] = i + 1;
        g.size[g.n++] = zsColliders[i];
    }
    return &g;
}

/* Member k of group g, in buf (ZS_MEMBER_MAX bytes). */
#define ZS_MEMBER_MAX 400

static size_t zsGroupMember(int g, uint32_t k, unsigned char *buf) {
    const zsGroups *gr = zsGetGroups();
    return zsColliderName(zsColliders[gr->start[g] + k % gr->size[g]], buf);
}

/* --- The model --- */

typedef struct zsEntry {
    double key;
    unsigned char *m;
    size_t len;
    uint32_t since;    /* The operation that inserted it. */
    uint32_t seenScan; /* The last scan that returned it. */
} zsEntry;

typedef struct zsModel {
    zsEntry *e;
    size_t n, cap;
    int appendDir; /* Where appends went since the tree was last empty. */
} zsModel;

static int zsCmp(double k1, const unsigned char *m1, size_t l1, double k2, const unsigned char *m2, size_t l2) {
    if (k1 != k2) return k1 < k2 ? -1 : 1;
    size_t min = l1 < l2 ? l1 : l2;
    int c = min ? memcmp(m1, m2, min) : 0;
    if (c) return c;
    return l1 < l2 ? -1 : l1 > l2;
}

static int zsCmpEntry(const zsEntry *e, double key, const unsigned char *m, size_t len) {
    return zsCmp(e->key, e->m, e->len, key, m, len);
}

/* The first index whose entry is at or after (key, m). */
static size_t zsLowerBound(const zsModel *md, double key, const unsigned char *m, size_t len) {
    size_t lo = 0, hi = md->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (zsCmpEntry(&md->e[mid], key, m, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static long zsFind(const zsModel *md, const unsigned char *m, size_t len) {
    double key = zsKey(m, len);
    size_t i = zsLowerBound(md, key, m, len);
    return i < md->n && zsCmpEntry(&md->e[i], key, m, len) == 0 ? (long)i : -1;
}

static void zsInsertAt(zsModel *md, size_t i, const unsigned char *m, size_t len, unsigned long since) {
    if (md->n == md->cap) {
        md->cap = md->cap * 2 + 64;
        md->e = realloc(md->e, md->cap * sizeof(zsEntry));
    }
    memmove(md->e + i + 1, md->e + i, (md->n - i) * sizeof(zsEntry));
    zsEntry *e = &md->e[i];
    e->key = zsKey(m, len);
    e->m = malloc(len ? len : 1);
    memcpy(e->m, m, len);
    e->len = len;
    e->since = since;
    e->seenScan = 0;
    md->n++;
}

static void zsInsert(zsModel *md, const unsigned char *m, size_t len, unsigned long since) {
    zsInsertAt(md, zsLowerBound(md, zsKey(m, len), m, len), m, len, since);
}

static void zsRemoveAt(zsModel *md, size_t i) {
    free(md->e[i].m);
    memmove(md->e + i, md->e + i + 1, (md->n - i - 1) * sizeof(zsEntry));
    md->n--;
}

static void zsModelFree(zsModel *md) {
    for (size_t i = 0; i < md->n; i++) free(md->e[i].m);
    free(md->e);
    memset(md, 0, sizeof(*md));
}

/* --- The driver --- */

typedef struct zsReader {
    const uint8_t *p, *end;
} zsReader;

static uint8_t zsByte(zsReader *r) {
    return r->p < r->end ? *r->p++ : 0;
}
static uint32_t zsU16(zsReader *r) {
    return zsByte(r) | (uint32_t)zsByte(r) << 8;
}
static uint32_t zsU32(zsReader *r) {
    return zsU16(r) | zsU16(r) << 16;
}

static const uint16_t zsLens[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 20, 24, 29, 30, 31, 40, 63, 64, 65, 100, 300};

/* A member into buf: often one of the model's, or one of a group whose
 * keys collide, else a new one of some length (its first bytes from the
 * input, whatever they are, so that new ones are many). */
static size_t zsMember(zsReader *r, const zsModel *md, unsigned char *buf) {
    uint8_t b = zsByte(r);
    if (md->n && b < 100) {
        const zsEntry *e = &md->e[(zsU16(r) | (uint32_t)zsByte(r) << 16) % md->n];
        memcpy(buf, e->m, e->len);
        return e->len;
    }
    if (b < 130) return zsGroupMember(zsU16(r) % zsGetGroups()->n, zsByte(r), buf);
    size_t len = zsLens[zsByte(r) % (sizeof(zsLens) / sizeof(zsLens[0]))];
    uint8_t seed = zsByte(r);
    for (size_t i = 0; i < len; i++) buf[i] = i < 4 ? zsByte(r) : (unsigned char)("abc\0\xff"[(seed + i * (seed | 1)) % 5]);
    return len;
}

/* The score argument of an insert or append: a keyed tree ignores it. */
static double zsIgnoredScore(zsReader *r) {
    static const double s[] = {0.0, -0.0, 1.0, -1.0, 0.5, 1e300, -1e300, INFINITY, -INFINITY, 4294967296.0};
    return s[zsByte(r) % (sizeof(s) / sizeof(s[0]))];
}

typedef struct zsState {
    zbt *t;
    zsModel md;
    zbtCursor cur;
    char err[320];
    unsigned long ops;
    int defragging;    /* A defrag in steps is under way, */
    uint32_t defragAt; /* to go on from this leaf id. */
    /* The scan under way, if any. */
    int scanning;
    unsigned long long scanCursor;
    unsigned long scanId, scanStart; /* Its number and the operation it began at. */
    unsigned long scanSteps;
    /* One scan step's batch. */
    zsEntry *batch;
    size_t nbatch, batchCap;
    /* What the run reached, to report. */
    unsigned long appended, refused, scans, most;
    int height;
} zsState;

static const char *zsFail(zsState *st, const char *what, long a, long b) {
    snprintf(st->err, sizeof(st->err), "%s: engine %ld, model %ld (operation %lu)", what, a, b, st->ops);
    return st->err;
}

#define ZS_EXPECT(cond, what, a, b)                                 \
    do {                                                            \
        if (!(cond)) return zsFail(st, what, (long)(a), (long)(b)); \
    } while (0)

/* The cursor's entry is the model's i-th: member, key (bit for bit) and rank. */
static const char *zsAt(zsState *st, const zbtCursor *c, size_t i, const char *what) {
    const zsEntry *e = &st->md.e[i];
    char w[64];
    snprintf(w, sizeof(w), "%s: member", what);
    ZS_EXPECT(c->len == e->len && memcmp(c->member, e->m, e->len) == 0, w, c->len, e->len);
    snprintf(w, sizeof(w), "%s: key", what);
    ZS_EXPECT(memcmp(&c->score, &e->key, sizeof(double)) == 0, w, (long)c->score, (long)e->key);
    snprintf(w, sizeof(w), "%s: rank", what);
    ZS_EXPECT(zbtCursorRank(c) == i, w, zbtCursorRank(c), i);
    return NULL;
}

/* Walks k steps from the model's i-th entry, forwards or backwards. */
static const char *zsWalk(zsState *st, zbtCursor *c, size_t i, int k, int back) {
    const char *err;
    for (int j = 0; j < k; j++) {
        if ((err = zsAt(st, c, i, "walk"))) return err;
        int more = back ? zbtPrev(c) : zbtNext(c);
        int want = back ? i > 0 : i + 1 < st->md.n;
        ZS_EXPECT(more == want, "walk: end", more, want);
        if (!more) break;
        i = back ? i - 1 : i + 1;
    }
    return NULL;
}

static void zsBatchAdd(void *privdata, const unsigned char *m, size_t len, double score) {
    zsState *st = privdata;
    if (st->nbatch == st->batchCap) {
        st->batchCap = st->batchCap * 2 + 64;
        st->batch = realloc(st->batch, st->batchCap * sizeof(zsEntry));
    }
    zsEntry *e = &st->batch[st->nbatch++];
    e->key = score;
    e->m = malloc(len ? len : 1);
    memcpy(e->m, m, len);
    e->len = len;
}

static void zsBatchClear(zsState *st) {
    for (size_t i = 0; i < st->nbatch; i++) free(st->batch[i].m);
    st->nbatch = 0;
}

/* One scan call from the scan's cursor, checked against the model: its
 * batch is every entry with a key from the cursor up to the next cursor,
 * in order, at least count of them unless the scan ended, and no more than
 * it takes to reach count and finish the last key. */
static const char *zsScanStep(zsState *st, size_t count) {
    zsModel *md = &st->md;
    if (!st->scanning) {
        st->scanning = 1;
        st->scanCursor = 0;
        st->scanId++;
        st->scanStart = st->ops;
        st->scanSteps = 0;
    }
    unsigned long long from = st->scanCursor;
    zsBatchClear(st);
    unsigned long long next = zbtScan(st->t, from, count, zsBatchAdd, st);
    st->scanSteps++;
    size_t lo = zsLowerBound(md, (double)from, (const unsigned char *)"", 0);
    size_t hi = next ? zsLowerBound(md, (double)next, (const unsigned char *)"", 0) : md->n;
    ZS_EXPECT(next == 0 || next > from, "scan: cursor goes back", next, from);
    ZS_EXPECT(next == 0 || hi < md->n, "scan: cursor past the last key", next, md->n);
    ZS_EXPECT(next == 0 || md->e[hi].key == (double)next, "scan: cursor is no member's key", next, hi);
    ZS_EXPECT(st->nbatch == hi - lo, "scan: batch size", st->nbatch, hi - lo);
    for (size_t i = 0; i < st->nbatch; i++) {
        const zsEntry *b = &st->batch[i], *e = &md->e[lo + i];
        ZS_EXPECT(b->len == e->len && memcmp(b->m, e->m, e->len) == 0, "scan: member", i, lo + i);
        ZS_EXPECT(memcmp(&b->key, &e->key, sizeof(double)) == 0, "scan: key", (long)b->key, (long)e->key);
        md->e[lo + i].seenScan = st->scanId;
    }
    if (next) {
        ZS_EXPECT(st->nbatch >= count, "scan: batch below count", st->nbatch, count);
        size_t lastKey = st->nbatch;
        while (lastKey > 0 && st->batch[lastKey - 1].key == st->batch[st->nbatch - 1].key) lastKey--;
        ZS_EXPECT(lastKey < count, "scan: batch past count before its last key", lastKey, count);
    }
    zsBatchClear(st);
    st->scanCursor = next;
    if (next) return NULL;
    /* The end: every member present throughout was returned. */
    st->scanning = 0;
    st->scans++;
    for (size_t i = 0; i < md->n; i++)
        if (md->e[i].since < st->scanStart) ZS_EXPECT(md->e[i].seenScan == st->scanId, "scan: member missed", i, st->scanSteps);
    return NULL;
}

/* A whole scan with no change in between: each member exactly once. */
static const char *zsFullScan(zsState *st, size_t count) {
    if (st->scanning) return NULL;
    unsigned long id = st->scanId + 1;
    int steps = 0;
    do {
        const char *err = zsScanStep(st, count);
        if (err) return err;
        ZS_EXPECT(++steps <= (int)st->md.n + 1, "full scan: steps", steps, st->md.n);
    } while (st->scanning);
    for (size_t i = 0; i < st->md.n; i++) ZS_EXPECT(st->md.e[i].seenScan == id, "full scan: member missed", i, st->md.n);
    return NULL;
}

static void *zsMove(void *p) {
    size_t size = zmalloc_size(p);
    void *q = zmalloc(size);
    memcpy(q, p, size);
    zfree(p);
    return q;
}

/* Appends, as a load makes them: accepted when the member goes after the
 * last entry (before the first), in the direction appends have gone since
 * the tree was last empty; else ZBT_ERR_ORDER, a member already there too
 * (its key is its own: it is never past an end). With fallback, a refused
 * member is then inserted, as setBtreeLoadAdd does. */
static const char *zsAppendOne(zsState *st, zsReader *r, const unsigned char *m, size_t len, int fallback) {
    zsModel *md = &st->md;
    double key = zsKey(m, len);
    int ret = zbtAppend(st->t, zsIgnoredScore(r), m, len);
    int want = ZBT_ERR_ORDER, dir = 0;
    if (md->n == 0)
        want = ZBT_OK;
    else if (md->appendDir >= 0 && zsCmpEntry(&md->e[md->n - 1], key, m, len) < 0)
        want = ZBT_OK, dir = 1;
    else if (md->appendDir <= 0 && zsCmpEntry(&md->e[0], key, m, len) > 0)
        want = ZBT_OK, dir = -1;
    ZS_EXPECT(ret == want, "append", ret, want);
    if (ret == ZBT_OK) {
        md->appendDir = dir;
        zsInsertAt(md, dir < 0 ? 0 : md->n, m, len, st->ops);
        st->appended++;
    } else if (fallback) {
        st->refused++;
        long i = zsFind(md, m, len);
        ret = zbtInsert(st->t, 0.0, m, len);
        ZS_EXPECT(ret == (i >= 0 ? ZBT_ERR_DUP : ZBT_OK), "insert after append", ret, i);
        if (i < 0) zsInsert(md, m, len, st->ops);
    }
    return NULL;
}

/* Members appended to a model out of order, then sorted (for building
 * big models in O(n log n)). Duplicates are the caller's to avoid. */
static void zsPush(zsModel *md, const unsigned char *m, size_t len) {
    zsInsertAt(md, md->n, m, len, 0);
}

static int zsCmpSort(const void *a, const void *b) {
    const zsEntry *x = a, *y = b;
    return zsCmp(x->key, x->m, x->len, y->key, y->m, y->len);
}

static void zsSort(zsModel *md) {
    if (md->n > 1) qsort(md->e, md->n, sizeof(zsEntry), zsCmpSort);
}

/* A run of appends:
 * - new members (some already there), sorted by (key, member) or not;
 * - the entries at the top (bottom) taken out by rank and appended back
 *   in order, going up (down), strays between them;
 * - a small set emptied and loaded again whole, as a conversion does. */
static const char *zsAppends(zsState *st, zsReader *r) {
    zsModel *md = &st->md, run = {0};
    unsigned char mb[ZS_MEMBER_MAX];
    uint8_t mode = zsByte(r), k = zsByte(r), desc = zsByte(r) & 1, sorted = zsByte(r);
    const char *err = NULL;
    if (mode < 96) {
        for (int j = 0; j < k % 48; j++) {
            size_t len = zsMember(r, md, mb);
            zsPush(&run, mb, len);
        }
        if (sorted >= 64) zsSort(&run);
    } else {
        size_t n = mode < 224 || md->n > 600 ? (size_t)k % 64 + 1 : md->n;
        if (n > md->n) n = md->n;
        size_t start = mode < 224 && !desc ? md->n - n : 0;
        for (size_t j = 0; j < n; j++) zsPush(&run, md->e[start + j].m, md->e[start + j].len);
        unsigned long del = n ? zbtDeleteRankRange(st->t, start, start + n - 1) : 0;
        if (del != n) err = zsFail(st, "appends: delete rank range", (long)del, (long)n);
        for (size_t j = 0; j < n; j++) zsRemoveAt(md, start);
    }
    for (size_t j = 0; j < run.n && !err; j++) {
        const zsEntry *a = &run.e[desc ? run.n - 1 - j : j];
        err = zsAppendOne(st, r, a->m, a->len, mode >= 96);
        if (!err && mode >= 96 && sorted < 48 && zsByte(r) < 32) {
            size_t len = zsMember(r, md, mb);
            err = zsAppendOne(st, r, mb, len, 1);
        }
    }
    zsModelFree(&run);
    /* Mostly ended as a load ends them; else the next operations find
     * the appends' counts not carried up yet. */
    if (zsByte(r) >= 32) zbtAppendDone(st->t);
    return err;
}

static const char *zsStep(zsState *st, zsReader *r) {
    unsigned char mb[ZS_MEMBER_MAX];
    zbt *t = st->t;
    zsModel *md = &st->md;
    zbtCursor *c = &st->cur;
    uint8_t op = zsByte(r) % 16;
    const char *err = NULL;
    st->ops++;
    if (st->defragging) {
        st->defragAt = zbtDefragLeaves(t, st->defragAt, zsByte(r) % 4 + 1, zsMove);
        st->defragging = st->defragAt != 0;
    }
    switch (op) {
    case 0:
    case 1:
    case 2: { /* insert (SADD) */
        size_t len = zsMember(r, md, mb);
        int ret = zbtInsert(t, zsIgnoredScore(r), mb, len);
        long i = zsFind(md, mb, len);
        ZS_EXPECT(ret == (i >= 0 ? ZBT_ERR_DUP : ZBT_OK), "insert", ret, i);
        if (i < 0) zsInsert(md, mb, len, st->ops);
        break;
    }
    case 3:
    case 4: { /* delete (SREM), the deleted entry's score being its key */
        size_t len = zsMember(r, md, mb);
        double s = -1;
        int ret = zbtDelete(t, mb, len, zsByte(r) & 1 ? &s : NULL);
        long i = zsFind(md, mb, len);
        ZS_EXPECT(ret == (i >= 0), "delete", ret, i);
        if (i >= 0) {
            ZS_EXPECT(s == -1 || s == md->e[i].key, "deleted key", (long)s, (long)md->e[i].key);
            zsRemoveAt(md, (size_t)i);
        }
        break;
    }
    case 5: { /* by member: score, find, rank both ways (SISMEMBER) */
        size_t len = zsMember(r, md, mb);
        long i = zsFind(md, mb, len);
        double s;
        unsigned long rank, rrank;
        int found = zbtScore(t, mb, len, &s);
        ZS_EXPECT(found == (i >= 0), "score: found", found, i);
        ZS_EXPECT(!found || s == md->e[i].key, "score: key", (long)s, (long)md->e[i].key);
        ZS_EXPECT(zbtRank(t, mb, len, 0, &rank) == found, "rank: found", !found, i);
        ZS_EXPECT(!found || rank == (unsigned long)i, "rank", rank, i);
        ZS_EXPECT(zbtRank(t, mb, len, 1, &rrank) == found, "revrank: found", !found, i);
        ZS_EXPECT(!found || rrank == md->n - 1 - (unsigned long)i, "revrank", rrank, md->n - 1 - i);
        ZS_EXPECT(zbtFind(t, mb, len, c) == found, "find: found", !found, i);
        if (found) err = zsWalk(st, c, (size_t)i, zsByte(r) % 8 + 1, zsByte(r) & 1);
        break;
    }
    case 6: { /* at a rank, and a random member as SRANDMEMBER takes it */
        unsigned long rank = (zsU16(r) | (uint32_t)zsByte(r) << 16) % (md->n + 1);
        int found = zbtAtRank(t, rank, c);
        ZS_EXPECT(found == (rank < md->n), "at rank", found, rank);
        if (!found) break;
        if ((err = zsAt(st, c, rank, "at rank"))) break;
        memcpy(mb, c->member, c->len);
        size_t len = c->len;
        unsigned long back;
        ZS_EXPECT(zbtRank(t, mb, len, 0, &back) && back == rank, "rank of the member at a rank", back, rank);
        ZS_EXPECT(zbtAtRank(t, rank, c), "at rank again", 0, rank);
        err = zsWalk(st, c, rank, zsByte(r) % 24 + 1, zsByte(r) & 1);
        break;
    }
    case 7: { /* seek */
        static const double edges[] = {-INFINITY, -1.0, -0.0, 0.0, 0.5, 1.0, (double)((1ULL << ZBT_KEY_BITS) - 1),
                                       (double)(1ULL << ZBT_KEY_BITS), 4294967296.0, INFINITY};
        uint8_t kind = zsByte(r) % 6;
        double key;
        size_t len;
        if (md->n && kind < 4) {
            const zsEntry *e = &md->e[(zsU16(r) | (uint32_t)zsByte(r) << 16) % md->n];
            key = e->key;
            if (kind == 0) { /* the entry itself */
                memcpy(mb, e->m, e->len);
                len = e->len;
            } else if (kind == 1) { /* its key, some member */
                len = zsMember(r, md, mb);
            } else if (kind == 2) { /* the start of its key */
                len = 0;
            } else { /* between keys */
                key += zsByte(r) & 1 ? 0.5 : -0.5;
                len = zsMember(r, md, mb);
            }
        } else if (kind < 5) {
            key = (double)(zsU32(r) % ((1ULL << ZBT_KEY_BITS) + 2));
            len = zsByte(r) & 1 ? zsMember(r, md, mb) : 0;
        } else {
            key = edges[zsByte(r) % (sizeof(edges) / sizeof(edges[0]))];
            len = zsMember(r, md, mb);
        }
        size_t i = zsLowerBound(md, key, mb, len);
        int found = zbtSeek(t, key, mb, len, c);
        ZS_EXPECT(found == (i < md->n), "seek", found, i);
        if (found) err = zsWalk(st, c, i, zsByte(r) % 6 + 1, zsByte(r) & 1);
        break;
    }
    case 8:
    case 9: { /* a scan step (SSCAN), other operations between the steps */
        uint8_t b = zsByte(r);
        size_t count = b % 20 + 1;
        if (b >= 200) count = b < 250 ? 200 : 5000;
        err = zsScanStep(st, count);
        break;
    }
    case 10: /* bulk appends (loading, conversion from a small set) */
        err = zsAppends(st, r);
        break;
    case 11: { /* a random member removed, as SPOP does: an out-of-line
                * member passes the cursor's own bytes to the delete */
        if (!md->n) break;
        unsigned long rank = (zsU16(r) | (uint32_t)zsByte(r) << 16) % md->n;
        ZS_EXPECT(zbtAtRank(t, rank, c), "pop: at rank", 0, rank);
        const unsigned char *m = c->member;
        if (c->len <= ZBT_MAX_INLINE) {
            memcpy(mb, c->member, c->len);
            m = mb;
        }
        ZS_EXPECT(zbtDelete(t, m, c->len, NULL), "pop", 0, rank);
        zsRemoveAt(md, rank);
        break;
    }
    case 12: { /* delete a rank range, now and then */
        if (zsByte(r) >= 48) break;
        unsigned long start = (zsU16(r) | (uint32_t)zsByte(r) << 16) % (md->n + 2), end = start + zsByte(r) % 40;
        unsigned long del = zbtDeleteRankRange(t, start, end);
        unsigned long want = start < md->n ? (end < md->n ? end : md->n - 1) - start + 1 : 0;
        ZS_EXPECT(del == want, "delete rank range", del, want);
        for (unsigned long i = 0; i < want; i++) zsRemoveAt(md, start);
        break;
    }
    case 13: { /* a whole group of colliding members in, or out */
        int g = (int)(zsU16(r) % zsGetGroups()->n), out = zsByte(r) & 1;
        uint32_t size = zsGetGroups()->size[g], first = zsByte(r);
        for (uint32_t k = 0; k < size; k++) {
            size_t len = zsGroupMember(g, first + k, mb);
            long i = zsFind(md, mb, len);
            if (out) {
                ZS_EXPECT(zbtDelete(t, mb, len, NULL) == (i >= 0), "group delete", !(i >= 0), i);
                if (i >= 0) zsRemoveAt(md, (size_t)i);
            } else {
                int ret = zbtInsert(t, 0.0, mb, len);
                ZS_EXPECT(ret == (i >= 0 ? ZBT_ERR_DUP : ZBT_OK), "group insert", ret, i);
                if (i < 0) zsInsert(md, mb, len, st->ops);
            }
        }
        break;
    }
    case 14: { /* the ends; the keys the engine computes; a defrag now and then */
        int f = zbtFirst(t, c);
        ZS_EXPECT(f == (md->n > 0), "first", f, md->n);
        if (f && (err = zsWalk(st, c, 0, 3, 0))) break;
        int l = zbtLast(t, c);
        ZS_EXPECT(l == (md->n > 0), "last", l, md->n);
        if (l && (err = zsWalk(st, c, md->n - 1, 3, 1))) break;
        size_t len = zsMember(r, md, mb);
        double key = zbtMemberKey(mb, len);
        ZS_EXPECT(key == zsKey(mb, len), "member key", (long)key, (long)zsKey(mb, len));
        zbtMiss miss;
        double s;
        long i = zsFind(md, mb, len);
        int found = zbtScoreOrMiss(t, mb, len, &s, &miss);
        ZS_EXPECT(found == (i >= 0) && (!found || s == key), "score or miss", found, i);
        uint8_t defrag = zsByte(r);
        if (defrag < 24) { /* all at once, or in steps between the next operations */
            zbt *moved = defrag & 1 ? zbtDefrag(t, zsMove) : zbtDefragShell(t, zsMove);
            if (moved) st->t = t = moved;
            st->defragging = !(defrag & 1);
            st->defragAt = 0;
        }
        break;
    }
    default: { /* a whole scan, nothing changing, now and then */
        if (zsByte(r) >= 8) break;
        uint8_t b = zsByte(r);
        err = zsFullScan(st, b < 128 ? (size_t)(b % 16 + 1) : (size_t)b * 8);
        break;
    }
    }
    if (err) return err;
    ZS_EXPECT(zbtLength(st->t) == md->n, "length", zbtLength(st->t), md->n);
    if (md->n > st->most) st->most = md->n;
    if (zbtHeight(st->t) > st->height) st->height = zbtHeight(st->t);
    return NULL;
}

static void zsInit(zsState *st) {
    memset(st, 0, sizeof(*st));
    st->t = zbtCreateKeyed();
}

static void zsFree(zsState *st) {
    zbtFree(st->t);
    zsModelFree(&st->md);
    zsBatchClear(st);
    free(st->batch);
    st->batch = NULL;
    st->batchCap = 0;
}

/* Everything the engine holds equals the model: its invariants, then every
 * entry walked from the first. */
static const char *zsFull(zsState *st) {
    const char *err = zbtCheck(st->t);
    if (err) return err;
    if (!zbtIsKeyed(st->t)) return "the tree is not keyed";
    if (!st->md.n) return NULL;
    if (!zbtFirst(st->t, &st->cur)) return zsFail(st, "first", 0, (long)st->md.n);
    return zsWalk(st, &st->cur, 0, (int)st->md.n, 0);
}

#endif

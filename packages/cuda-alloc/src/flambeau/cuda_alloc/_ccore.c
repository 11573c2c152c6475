/* The caching allocator's core in C: the same policy as _core.py's PyCore, block for block.
 *
 * Compiled on first use by _ccore.py (cffi, API mode). One ca_core per device: a table
 * address -> block (open addressing), per pool a free list sorted by (size, serial, address) in a
 * growable array (each entry with its segment's serial number: first fit scans the entries
 * that fit), segments as doubly linked chains of blocks, and the hot statistics in the
 * layout of _stats.FastCounters. Every entry point takes the core's mutex: cffi releases the
 * GIL around calls. See Note [Core interface] in _core.py.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MIN_BLOCK_SIZE 512ULL
#define SMALL_SIZE (1ULL << 20)
#define LARGE_BUFFER (20ULL << 20)

enum { INACTIVE = 0, ALLOCATED = 1, PENDING = 2 };
enum { ALLOC_BYTES = 0, ALLOC_COUNT = 3, REQ_BYTES = 6, SPLIT_BYTES = 9, SPLIT_COUNT = 12,
       PEND_BYTES = 15, PEND_COUNT = 18, NSTAT = 21 };
enum { STAT_SMALL = 1, STAT_LARGE = 2 };

typedef struct Block {
    uint64_t address, size, requested;
    uint64_t serial; /* its segment's: segments are numbered in the order they were made */
    int64_t stamp;
    struct Block *prev, *next;
    int32_t pool, state;
} Block;

typedef struct { uint64_t size, address, serial; Block *block; } Entry;
typedef struct { Entry *items; size_t n, cap; int small; } Pool;
typedef struct { uint64_t key; Block *block; } Slot;

typedef struct {
    uint64_t segment, address, size, requested;
    int64_t stamp;
    int32_t pool, state;
} ca_record;

typedef struct ca_core {
    pthread_mutex_t mu;
    Pool *pools;
    int npools, cap_pools;
    Slot *slots;
    size_t nslots, count;
    int shift;
    Block *spare; /* recycled blocks, chained through next */
    uint64_t max_split;
    uint64_t next_serial; /* the serial number of the next segment */
    int64_t gc_clock;
    int64_t cur[NSTAT], tot[NSTAT], peak[NSTAT], off[NSTAT], active_peak[6], active_off[6];
} ca_core;

/* -- address table ------------------------------------------------------------------------ */

static inline size_t slot_of(const ca_core *c, uint64_t key) {
    return (size_t)(((key >> 9) * 0x9E3779B97F4A7C15ULL) >> c->shift);
}

static Block *map_get(const ca_core *c, uint64_t key) {
    size_t mask = c->nslots - 1, i = slot_of(c, key);
    for (;;) {
        const Slot *s = &c->slots[i];
        if (s->key == key) return s->block;
        if (s->key == 0) return NULL;
        i = (i + 1) & mask;
    }
}

static void map_insert_raw(ca_core *c, uint64_t key, Block *b) {
    size_t mask = c->nslots - 1, i = slot_of(c, key);
    while (c->slots[i].key != 0 && c->slots[i].key != key) i = (i + 1) & mask;
    if (c->slots[i].key == 0) c->count++;
    c->slots[i].key = key;
    c->slots[i].block = b;
}

static int map_reserve(ca_core *c) {
    /* Room for one more key at a load under 1/2. */
    if ((c->count + 1) * 2 <= c->nslots) return 0;
    size_t old_n = c->nslots;
    Slot *old = c->slots;
    Slot *slots = calloc(old_n * 2, sizeof(Slot));
    if (slots == NULL) return -1;
    c->slots = slots;
    c->nslots = old_n * 2;
    c->shift -= 1;
    c->count = 0;
    for (size_t i = 0; i < old_n; i++)
        if (old[i].key != 0) map_insert_raw(c, old[i].key, old[i].block);
    free(old);
    return 0;
}

static void map_delete(ca_core *c, uint64_t key) {
    size_t mask = c->nslots - 1, i = slot_of(c, key);
    while (c->slots[i].key != key) {
        if (c->slots[i].key == 0) return;
        i = (i + 1) & mask;
    }
    /* Backward-shift deletion keeps every probe chain unbroken. */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (c->slots[j].key == 0) break;
        size_t k = slot_of(c, c->slots[j].key);
        int stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            c->slots[i] = c->slots[j];
            i = j;
        }
    }
    c->slots[i].key = 0;
    c->slots[i].block = NULL;
    c->count--;
}

/* -- free lists ----------------------------------------------------------------------------- */

/* The first entry not below (size, serial, address): entries are sorted by size, then by
 * place (serial, address), as PyCore's keys are. */
static inline size_t lower_bound(const Pool *p, uint64_t size, uint64_t serial, uint64_t address) {
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = (lo + hi) >> 1;
        const Entry *e = &p->items[mid];
        if (e->size < size ||
            (e->size == size && (e->serial < serial || (e->serial == serial && e->address < address))))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int pool_reserve(Pool *p, size_t extra) {
    if (p->n + extra <= p->cap) return 0;
    size_t cap = p->cap ? p->cap * 2 : 16;
    while (cap < p->n + extra) cap *= 2;
    Entry *items = realloc(p->items, cap * sizeof(Entry));
    if (items == NULL) return -1;
    p->items = items;
    p->cap = cap;
    return 0;
}

static void pool_insert(Pool *p, Block *b) { /* room reserved by the caller */
    size_t i = lower_bound(p, b->size, b->serial, b->address);
    memmove(&p->items[i + 1], &p->items[i], (p->n - i) * sizeof(Entry));
    p->items[i].size = b->size;
    p->items[i].address = b->address;
    p->items[i].serial = b->serial;
    p->items[i].block = b;
    p->n++;
}

static void pool_remove_at(Pool *p, size_t i) {
    memmove(&p->items[i], &p->items[i + 1], (p->n - i - 1) * sizeof(Entry));
    p->n--;
}

static void pool_remove(Pool *p, const Block *b) {
    size_t i = lower_bound(p, b->size, b->serial, b->address);
    if (i < p->n && p->items[i].block == b) pool_remove_at(p, i);
}

/* -- blocks ---------------------------------------------------------------------------------- */

static Block *block_new(ca_core *c) {
    Block *b = c->spare;
    if (b != NULL) {
        c->spare = b->next;
        return b;
    }
    return malloc(sizeof(Block));
}

static void block_recycle(ca_core *c, Block *b) {
    b->next = c->spare;
    c->spare = b;
}

/* -- statistics (see _stats.FastCounters) ------------------------------------------------------ */

static inline void bump(ca_core *c, int base, int stat, int64_t amount) {
    int i = base + stat;
    c->cur[i] += amount;
    c->cur[base] += amount;
    if (amount > 0) {
        c->tot[i] += amount;
        if (c->cur[i] > c->peak[i]) c->peak[i] = c->cur[i];
        if (c->cur[base] > c->peak[base]) c->peak[base] = c->cur[base];
    }
}

static void note_active(ca_core *c, int stat) {
    int pools[2] = {0, stat};
    for (int q = 0; q < 2; q++) {
        int p = pools[q];
        int64_t bytes = c->cur[ALLOC_BYTES + p] + c->cur[PEND_BYTES + p];
        int64_t count = c->cur[ALLOC_COUNT + p] + c->cur[PEND_COUNT + p];
        if (bytes > c->active_peak[p]) c->active_peak[p] = bytes;
        if (count > c->active_peak[3 + p]) c->active_peak[3 + p] = count;
    }
}

static void uncount(ca_core *c, const Block *b) {
    int stat = c->pools[b->pool].small ? STAT_SMALL : STAT_LARGE;
    bump(c, ALLOC_BYTES, stat, -(int64_t)b->size);
    bump(c, ALLOC_COUNT, stat, -1);
    bump(c, REQ_BYTES, stat, -(int64_t)b->requested);
}

/* -- the policy ------------------------------------------------------------------------------- */

/* Hand out b (off its free list) for `rounded` bytes, splitting off the rest; see
 * PyCore._allocate. The caller reserved room for one more table slot and free entry. */
static uint64_t allocate(ca_core *c, Block *b, int pool_index, uint64_t rounded, uint64_t requested) {
    Pool *pool = &c->pools[pool_index];
    int small = pool->small;
    int stat = small ? STAT_SMALL : STAT_LARGE;
    int was_split = b->prev != NULL || b->next != NULL;
    uint64_t remaining = b->size - rounded;
    int split = small ? remaining >= MIN_BLOCK_SIZE : (remaining > SMALL_SIZE && rounded < c->max_split);
    Block *rest = split ? block_new(c) : NULL;
    if (split && rest == NULL) split = 0; /* out of host memory: hand out the whole block */
    if (split) {
        rest->address = b->address + rounded;
        rest->size = remaining;
        rest->requested = 0;
        rest->serial = b->serial;
        rest->stamp = c->gc_clock;
        rest->pool = pool_index;
        rest->state = INACTIVE;
        rest->prev = b;
        rest->next = b->next;
        if (rest->next != NULL) rest->next->prev = rest;
        b->next = rest;
        b->size = rounded;
        map_insert_raw(c, rest->address, rest);
        pool_insert(pool, rest);
        if (was_split) {
            c->cur[SPLIT_BYTES + stat] -= (int64_t)rounded;
            c->cur[SPLIT_BYTES] -= (int64_t)rounded;
        } else {
            bump(c, SPLIT_BYTES, stat, (int64_t)remaining);
            bump(c, SPLIT_COUNT, stat, 1);
        }
    } else if (was_split) {
        c->cur[SPLIT_BYTES + stat] -= (int64_t)b->size;
        c->cur[SPLIT_BYTES] -= (int64_t)b->size;
        c->cur[SPLIT_COUNT + stat] -= 1;
        c->cur[SPLIT_COUNT] -= 1;
    }
    b->state = ALLOCATED;
    b->requested = requested;
    bump(c, ALLOC_BYTES, stat, (int64_t)b->size);
    bump(c, ALLOC_COUNT, stat, 1);
    bump(c, REQ_BYTES, stat, (int64_t)requested);
    if (c->cur[PEND_COUNT]) note_active(c, stat);
    return b->address;
}

/* Merge a block no stream still uses with its free neighbours and cache it; see
 * PyCore._free_block. Needs room for one free entry (merging only frees some). */
static void free_block(ca_core *c, Block *b) {
    Pool *pool = &c->pools[b->pool];
    int64_t split_bytes = 0, split_count = 0;
    b->state = INACTIVE;
    Block *nxt = b->next;
    if (nxt != NULL && nxt->state == INACTIVE) {
        pool_remove(pool, nxt);
        map_delete(c, nxt->address);
        split_bytes -= (int64_t)nxt->size;
        split_count -= 1;
        b->size += nxt->size;
        b->next = nxt->next;
        if (b->next != NULL) b->next->prev = b;
        block_recycle(c, nxt);
    }
    Block *prev = b->prev;
    if (prev != NULL && prev->state == INACTIVE) {
        pool_remove(pool, prev);
        map_delete(c, b->address);
        split_bytes -= (int64_t)prev->size;
        split_count -= 1;
        prev->size += b->size;
        prev->next = b->next;
        if (prev->next != NULL) prev->next->prev = prev;
        block_recycle(c, b);
        b = prev;
    }
    if (b->prev != NULL || b->next != NULL) {
        split_bytes += (int64_t)b->size;
        split_count += 1;
    }
    int stat = pool->small ? STAT_SMALL : STAT_LARGE;
    if (split_bytes > 0) {
        bump(c, SPLIT_BYTES, stat, split_bytes);
        if (split_count) bump(c, SPLIT_COUNT, stat, split_count);
    } else if (split_bytes) {
        c->cur[SPLIT_BYTES + stat] += split_bytes;
        c->cur[SPLIT_BYTES] += split_bytes;
        c->cur[SPLIT_COUNT + stat] += split_count;
        c->cur[SPLIT_COUNT] += split_count;
    }
    b->stamp = c->gc_clock;
    pool_insert(pool, b);
}

/* -- entry points ------------------------------------------------------------------------------ */

ca_core *ca_new(void) {
    ca_core *c = calloc(1, sizeof(ca_core));
    if (c == NULL) return NULL;
    c->nslots = 1024;
    c->shift = 64 - 10;
    c->slots = calloc(c->nslots, sizeof(Slot));
    if (c->slots == NULL || pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c->slots);
        free(c);
        return NULL;
    }
    c->max_split = 1ULL << 62;
    return c;
}

void ca_delete(ca_core *c) {
    if (c == NULL) return;
    for (size_t i = 0; i < c->nslots; i++)
        if (c->slots[i].key != 0) free(c->slots[i].block);
    while (c->spare != NULL) {
        Block *b = c->spare;
        c->spare = b->next;
        free(b);
    }
    for (int i = 0; i < c->npools; i++) free(c->pools[i].items);
    free(c->pools);
    free(c->slots);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int ca_new_pool(ca_core *c, int small) {
    int index = -1;
    pthread_mutex_lock(&c->mu);
    if (c->npools == c->cap_pools) {
        int cap = c->cap_pools ? c->cap_pools * 2 : 8;
        Pool *pools = realloc(c->pools, (size_t)cap * sizeof(Pool));
        if (pools == NULL) goto done;
        c->pools = pools;
        c->cap_pools = cap;
    }
    index = c->npools++;
    memset(&c->pools[index], 0, sizeof(Pool));
    c->pools[index].small = small;
done:
    pthread_mutex_unlock(&c->mu);
    return index;
}

void ca_set_max_split(ca_core *c, uint64_t size) {
    pthread_mutex_lock(&c->mu);
    c->max_split = size;
    pthread_mutex_unlock(&c->mu);
}

void ca_set_gc_clock(ca_core *c, int64_t tick) {
    pthread_mutex_lock(&c->mu);
    c->gc_clock = tick;
    pthread_mutex_unlock(&c->mu);
}

uint64_t ca_malloc(ca_core *c, int pool_index, uint64_t rounded, uint64_t requested) {
    uint64_t address = 0;
    pthread_mutex_lock(&c->mu);
    Pool *pool = &c->pools[pool_index];
    /* The blocks that fit are the entries [i, j): at least this big, and below the oversize
     * limit (don't carve an oversize block for a small request; give an oversize request an
     * oversize block only if it nearly fits). The small pool takes the first (best fit, ties
     * to the older segment); the large pool the block of the oldest segment, lowest address
     * first (see PyCore.malloc and Note [First fit in segment order] in _allocator.py). */
    uint64_t max_split = c->max_split;
    size_t i = lower_bound(pool, rounded, 0, 0);
    size_t j = lower_bound(pool, rounded < max_split ? max_split : rounded + LARGE_BUFFER, 0, 0);
    if (i < j && map_reserve(c) == 0 && pool_reserve(pool, 1) == 0) {
        size_t first = i;
        for (size_t k = i + 1; k < j && !pool->small; k++) {
            const Entry *e = &pool->items[k], *f = &pool->items[first];
            if (e->serial < f->serial || (e->serial == f->serial && e->address < f->address)) first = k;
        }
        Block *b = pool->items[first].block;
        pool_remove_at(pool, first);
        address = allocate(c, b, pool_index, rounded, requested);
    }
    pthread_mutex_unlock(&c->mu);
    return address;
}

uint64_t ca_malloc_segment(ca_core *c, int pool_index, uint64_t address, uint64_t size, uint64_t rounded,
                           uint64_t requested) {
    uint64_t out = 0;
    if (address == 0) return 0; /* 0 marks empty table slots; no device hands it out */
    pthread_mutex_lock(&c->mu);
    Block *b = NULL;
    if (map_reserve(c) == 0 && pool_reserve(&c->pools[pool_index], 1) == 0 && (b = block_new(c)) != NULL) {
        b->address = address;
        b->size = size;
        b->requested = 0;
        b->serial = c->next_serial++;
        b->stamp = c->gc_clock;
        b->pool = pool_index;
        b->state = INACTIVE;
        b->prev = b->next = NULL;
        map_insert_raw(c, address, b);
        if (map_reserve(c) == 0) out = allocate(c, b, pool_index, rounded, requested);
        else out = allocate(c, b, pool_index, size, requested); /* no room to split */
    }
    pthread_mutex_unlock(&c->mu);
    return out;
}

int ca_free(ca_core *c, uint64_t address) {
    int rc = -1;
    pthread_mutex_lock(&c->mu);
    Block *b = map_get(c, address);
    if (b != NULL && b->state == ALLOCATED) {
        if (pool_reserve(&c->pools[b->pool], 1) == 0) {
            uncount(c, b);
            free_block(c, b);
            rc = 0;
        } else {
            rc = -2;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int ca_mark_pending(ca_core *c, uint64_t address) {
    int rc = -1;
    pthread_mutex_lock(&c->mu);
    Block *b = map_get(c, address);
    if (b != NULL && b->state == ALLOCATED) {
        int stat = c->pools[b->pool].small ? STAT_SMALL : STAT_LARGE;
        uncount(c, b);
        b->state = PENDING;
        bump(c, PEND_BYTES, stat, (int64_t)b->size);
        bump(c, PEND_COUNT, stat, 1);
        note_active(c, stat);
        rc = 0;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int ca_release_pending(ca_core *c, uint64_t address) {
    int rc = -1;
    pthread_mutex_lock(&c->mu);
    Block *b = map_get(c, address);
    if (b != NULL && b->state == PENDING) {
        if (pool_reserve(&c->pools[b->pool], 1) == 0) {
            int stat = c->pools[b->pool].small ? STAT_SMALL : STAT_LARGE;
            bump(c, PEND_BYTES, stat, -(int64_t)b->size);
            bump(c, PEND_COUNT, stat, -1);
            free_block(c, b);
            rc = 0;
        } else {
            rc = -2;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int ca_block_info(ca_core *c, uint64_t address, int32_t *pool, uint64_t *size, int32_t *state) {
    int rc = -1;
    pthread_mutex_lock(&c->mu);
    Block *b = map_get(c, address);
    if (b != NULL) {
        *pool = b->pool;
        *size = b->size;
        *state = b->state;
        rc = 0;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int64_t ca_remove_segment(ca_core *c, uint64_t address) {
    int64_t size = -1;
    pthread_mutex_lock(&c->mu);
    Block *b = map_get(c, address);
    if (b != NULL && b->state == INACTIVE && b->prev == NULL && b->next == NULL) {
        pool_remove(&c->pools[b->pool], b);
        map_delete(c, address);
        size = (int64_t)b->size;
        block_recycle(c, b);
    }
    pthread_mutex_unlock(&c->mu);
    return size;
}

/* Every block, chain by chain (segments in table order; the caller sorts them). Returns
 * the number of blocks; writes at most `cap` records. */
size_t ca_blocks(ca_core *c, ca_record *out, size_t cap) {
    pthread_mutex_lock(&c->mu);
    size_t n = c->count;
    if (n <= cap) {
        size_t k = 0;
        for (size_t i = 0; i < c->nslots; i++) {
            Block *head = c->slots[i].block;
            if (c->slots[i].key == 0 || head->prev != NULL) continue;
            for (Block *b = head; b != NULL; b = b->next) {
                ca_record *r = &out[k++];
                r->segment = head->address;
                r->address = b->address;
                r->size = b->size;
                r->requested = b->requested;
                r->stamp = b->stamp;
                r->pool = b->pool;
                r->state = b->state;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

size_t ca_free_list(ca_core *c, int pool_index, uint64_t *sizes, uint64_t *addresses, size_t cap) {
    pthread_mutex_lock(&c->mu);
    const Pool *p = &c->pools[pool_index];
    size_t n = p->n;
    if (n <= cap) {
        for (size_t i = 0; i < n; i++) {
            sizes[i] = p->items[i].size;
            addresses[i] = p->items[i].address;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* cur, tot, peak, off (21 each), active_peak, active_off (6 each): 96 values. */
void ca_counters(ca_core *c, int64_t *out) {
    pthread_mutex_lock(&c->mu);
    memcpy(out, c->cur, sizeof c->cur);
    memcpy(out + NSTAT, c->tot, sizeof c->tot);
    memcpy(out + 2 * NSTAT, c->peak, sizeof c->peak);
    memcpy(out + 3 * NSTAT, c->off, sizeof c->off);
    memcpy(out + 4 * NSTAT, c->active_peak, sizeof c->active_peak);
    memcpy(out + 4 * NSTAT + 6, c->active_off, sizeof c->active_off);
    pthread_mutex_unlock(&c->mu);
}

int64_t ca_current(ca_core *c, int i) {
    pthread_mutex_lock(&c->mu);
    int64_t v = c->cur[i];
    pthread_mutex_unlock(&c->mu);
    return v;
}

int64_t ca_peak(ca_core *c, int i) {
    pthread_mutex_lock(&c->mu);
    int64_t v = c->peak[i];
    pthread_mutex_unlock(&c->mu);
    return v;
}

void ca_reset_peak(ca_core *c) {
    pthread_mutex_lock(&c->mu);
    memcpy(c->peak, c->cur, sizeof c->cur);
    for (int p = 0; p < 3; p++) {
        c->active_peak[p] = c->cur[ALLOC_BYTES + p] + c->cur[PEND_BYTES + p];
        c->active_peak[3 + p] = c->cur[ALLOC_COUNT + p] + c->cur[PEND_COUNT + p];
    }
    pthread_mutex_unlock(&c->mu);
}

void ca_reset_accumulated(ca_core *c) {
    pthread_mutex_lock(&c->mu);
    memset(c->tot, 0, sizeof c->tot);
    memcpy(c->off, c->cur, sizeof c->cur);
    for (int p = 0; p < 3; p++) {
        c->active_off[p] = c->cur[ALLOC_BYTES + p] + c->cur[PEND_BYTES + p];
        c->active_off[3 + p] = c->cur[ALLOC_COUNT + p] + c->cur[PEND_COUNT + p];
    }
    pthread_mutex_unlock(&c->mu);
}

/* Model-based randomised test of the engine (lrc + tsvt + merge).
 *
 * Random sequences of {CPU stores, device d writes (d = 0..2), launch on d,
 * sync d, snapshot sync of d (its kernels go on writing after), write() to
 * the file, read() of the file, a write by another
 * process, msync, munmap of part, mmap again} are applied twice:
 *  - to the engine, with plain byte buffers standing in for the file/page
 *    cache (the CPU replica of a MAP_SHARED region), each device's replica
 *    and base copies, moved exactly as the engine's plans say;
 *  - to a reference model that states DESIGN §1 directly: vector clocks
 *    give the "ordered before" relation, and every reader sees, per byte,
 *    the latest writes ordered before it, the highest owner id winning
 *    among concurrent ones.
 * After every launch the device's replica must equal the model's view of
 * that device; after every sync and every read() the file must equal the
 * CPU's view.
 *
 * Writes always store a fresh value (the k-th write of a byte stores
 * k mod 255 + 1 and no epoch lasts 100 operations), so no write leaves a
 * byte as it was at a point the diff compares against: the one thing a
 * byte-level diff cannot see (lrc.h).
 *
 * LRC_MODEL_SEED=s replays one seed (LRC_MODEL_VERBOSE=1 prints the ops);
 * LRC_MODEL_SEEDS and LRC_MODEL_OPS change the run's size.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lrc_harness.h"

#define NOWN (NDEV + 1) /* owners: CPU 0, device d is d+1 */
#define MAX_EPOCH_OPS 100

/* ---------- the reference model ---------- */

struct write_rec { /* one write operation (a run of bytes) by an owner */
	uint32_t vc[NOWN];
};

struct hist_entry {
	uint32_t seq; /* the writer's own clock component at the write */
	uint8_t value;
};

struct byte_hist { /* writes of one byte by one owner, oldest first */
	struct hist_entry *items;
	uint32_t count, capacity;
};

struct model {
	uint32_t vc[NOWN][NOWN];     /* each owner's vector clock */
	struct write_rec *log[NOWN]; /* log[o][seq] */
	uint32_t log_cap[NOWN];
	struct byte_hist hist[MAX_BYTES][NOWN];
	uint8_t view[NOWN][MAX_BYTES]; /* materialised views: CPU, devices */
	uint8_t initial[MAX_BYTES];
	/* which bytes each write touched: first byte and length, per log entry */
	uint32_t *log_first[NOWN], *log_len[NOWN];
};

static bool vc_leq(const uint32_t *a, const uint32_t *b)
{
	for (int i = 0; i < NOWN; i++)
		if (a[i] > b[i])
			return false;
	return true;
}

/* The value reader x sees at byte b: per owner the latest write of b
 * ordered before x's read; among those, drop every one ordered before
 * another; the highest owner id among the rest wins. */
static uint8_t model_value(const struct model *m, int x, uint32_t b, int *winner)
{
	int cand_owner[NOWN];
	const uint32_t *cand_vc[NOWN];
	uint8_t cand_val[NOWN];
	int n = 0;
	for (int o = 0; o < NOWN; o++) {
		const struct byte_hist *h = &m->hist[b][o];
		for (int i = (int)h->count - 1; i >= 0; i--) {
			if (h->items[i].seq <= m->vc[x][o]) {
				cand_owner[n] = o;
				cand_vc[n] = m->log[o][h->items[i].seq].vc;
				cand_val[n] = h->items[i].value;
				n++;
				break;
			}
		}
	}
	int best = -1;
	for (int i = 0; i < n; i++) {
		bool dominated = false;
		for (int j = 0; j < n && !dominated; j++)
			dominated = j != i && vc_leq(cand_vc[i], cand_vc[j]);
		if (!dominated && (best < 0 || cand_owner[i] > cand_owner[best]))
			best = i;
	}
	*winner = best < 0 ? -1 : cand_owner[best];
	return best < 0 ? m->initial[b] : cand_val[best];
}

static void model_write(struct model *m, int o, uint32_t first, uint32_t len, const uint8_t *vals)
{
	uint32_t seq = ++m->vc[o][o];
	if (seq >= m->log_cap[o]) {
		m->log_cap[o] = m->log_cap[o] ? m->log_cap[o] * 2 : 1024;
		m->log[o] = realloc(m->log[o], m->log_cap[o] * sizeof(struct write_rec));
		m->log_first[o] = realloc(m->log_first[o], m->log_cap[o] * sizeof(uint32_t));
		m->log_len[o] = realloc(m->log_len[o], m->log_cap[o] * sizeof(uint32_t));
		assert_non_null(m->log[o]);
		assert_non_null(m->log_first[o]);
		assert_non_null(m->log_len[o]);
	}
	memcpy(m->log[o][seq].vc, m->vc[o], sizeof(m->vc[o]));
	m->log_first[o][seq] = first;
	m->log_len[o][seq] = len;
	for (uint32_t i = 0; i < len; i++) {
		struct byte_hist *h = &m->hist[first + i][o];
		if (h->count == h->capacity) {
			h->capacity = h->capacity ? h->capacity * 2 : 4;
			h->items = realloc(h->items, h->capacity * sizeof(*h->items));
			assert_non_null(h->items);
		}
		h->items[h->count++] = (struct hist_entry){seq, vals[i]};
		m->view[o][first + i] = vals[i];
	}
}

/* Reader x learns everything `from` knows (launch: a device learns the
 * CPU's clock; sync: the CPU learns a device's). Recomputes x's view of
 * the bytes of every write that became visible.
 *
 * Where the device's unsynced write of a byte loses to a concurrent write
 * of a higher owner at such a meeting point (its sync merging into the
 * CPU page, or its next launch acquiring the winner), the loss is decided
 * and the losing write is discarded: it never wins later, even when the
 * winner is itself overwritten by a write that the loser was concurrent
 * with. That is what a merge of pages does, and the one refinement the
 * engine makes to the rule of DESIGN §1 (README, "Consistency"). */
static void model_join(struct model *m, int x, int from)
{
	int dev = x == 0 ? from : x; /* the device side of this meeting */
	uint32_t synced = m->vc[0][dev]; /* the device's writes the CPU knew before */
	uint32_t old[NOWN];
	memcpy(old, m->vc[x], sizeof(old));
	for (int o = 0; o < NOWN; o++)
		if (m->vc[from][o] > m->vc[x][o])
			m->vc[x][o] = m->vc[from][o];
	for (int o = 0; o < NOWN; o++) {
		for (uint32_t seq = old[o] + 1; seq <= m->vc[x][o]; seq++) {
			for (uint32_t i = 0; i < m->log_len[o][seq]; i++) {
				uint32_t b = m->log_first[o][seq] + i;
				int winner;
				m->view[x][b] = model_value(m, x, b, &winner);
				if (winner == dev)
					continue;
				struct byte_hist *h = &m->hist[b][dev];
				while (h->count && h->items[h->count - 1].seq > synced)
					h->count--;
			}
		}
	}
}

/* Forgets history no reader can need: per byte and owner, entries older
 * than the newest one every reader already sees. */
static void model_prune(struct model *m)
{
	for (int o = 0; o < NOWN; o++) {
		uint32_t floor = UINT32_MAX;
		for (int x = 0; x < NOWN; x++)
			if (m->vc[x][o] < floor)
				floor = m->vc[x][o];
		for (uint32_t b = 0; b < MAX_BYTES; b++) {
			struct byte_hist *h = &m->hist[b][o];
			uint32_t keep_from = 0;
			for (uint32_t i = 0; i < h->count; i++)
				if (h->items[i].seq <= floor)
					keep_from = i;
			if (keep_from) {
				memmove(h->items, h->items + keep_from,
					(h->count - keep_from) * sizeof(*h->items));
				h->count -= keep_from;
			}
		}
	}
}

static void model_free(struct model *m)
{
	for (int o = 0; o < NOWN; o++) {
		free(m->log[o]);
		free(m->log_first[o]);
		free(m->log_len[o]);
		for (uint32_t b = 0; b < MAX_BYTES; b++)
			free(m->hist[b][o].items);
	}
}

/* ---------- the run ---------- */

struct run {
	uint64_t seed, rng;
	bool verbose;
	struct model *m;
	struct harness *h;
	uint8_t counter[MAX_BYTES]; /* per byte: the k of its k-th write */
	long op;
};

static uint64_t rnd(struct run *r)
{
	/* splitmix64 */
	uint64_t z = (r->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t below(struct run *r, uint32_t n)
{
	return (uint32_t)(rnd(r) % n);
}

static void say(struct run *r, const char *fmt, ...)
{
	if (!r->verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "[seed %llu op %ld] ", (unsigned long long)r->seed, r->op);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void check_equal(struct run *r, const uint8_t *actual, const uint8_t *expected,
			bool mapped_only, const char *what)
{
	for (uint32_t b = 0; b < r->h->npages * PG; b++) {
		if (mapped_only && !r->h->mapped[b / PG])
			continue;
		if (actual[b] != expected[b])
			fail_msg("seed %llu op %ld: %s differs at page %u byte %u: engine %u, model %u "
				 "(replay: LRC_MODEL_SEED=%llu LRC_MODEL_VERBOSE=1)",
				 (unsigned long long)r->seed, r->op, what, b / PG, b % PG, actual[b],
				 expected[b], (unsigned long long)r->seed);
	}
}

/* A run of fresh values for bytes [first, first+len). */
static void fresh_values(struct run *r, uint32_t first, uint32_t len, uint8_t *vals)
{
	for (uint32_t i = 0; i < len; i++) {
		r->counter[first + i] = (uint8_t)(r->counter[first + i] % 255 + 1);
		vals[i] = r->counter[first + i];
	}
}

/* A run of bytes starting in a random page (a mapped one when
 * mapped_only), not reaching past the file or, when mapped_only, into an
 * unmapped page. Sometimes long enough to spill into the next page. */
static bool pick_run(struct run *r, bool mapped_only, uint32_t *first, uint32_t *len)
{
	struct harness *h = r->h;
	if (mapped_only && !h->nmapped)
		return false;
	uint32_t page;
	do
		page = below(r, h->npages);
	while (mapped_only && !h->mapped[page]);
	uint32_t end_page = page + 1;
	while (end_page < h->npages && (!mapped_only || h->mapped[end_page]))
		end_page++;
	*first = page * PG + below(r, PG);
	*len = 1 + below(r, below(r, 8) == 0 ? 600 : 48);
	if (*first + *len > end_page * PG)
		*len = end_page * PG - *first;
	return true;
}

static void op_cpu_store(struct run *r, bool through_write_call)
{
	struct harness *h = r->h;
	uint32_t first, len;
	uint8_t vals[600];
	if (!pick_run(r, !through_write_call, &first, &len))
		return;
	fresh_values(r, first, len, vals);
	say(r, "cpu %s [%u, +%u)", through_write_call ? "write()" : "store", first, len);
	memcpy(h->file + first, vals, len);
	model_write(r->m, 0, first, len, vals);
	/* The shim learns of stores from the write-protect scan and of write()
	 * from its hook: either way, pages of the managed range are CPU-dirty. */
	uint32_t p0 = first / PG, p1 = (first + len - 1) / PG;
	for (uint32_t p = p0; p <= p1; p++)
		if (h->mapped[p])
			lrc_cpu_wrote(&h->region, p, 1);
}

static void op_external_write(struct run *r)
{
	struct harness *h = r->h;
	uint32_t first, len;
	uint8_t vals[600];
	pick_run(r, false, &first, &len);
	fresh_values(r, first, len, vals);
	say(r, "other process writes [%u, +%u)", first, len);
	memcpy(h->file + first, vals, len);
	model_write(r->m, 0, first, len, vals);
	for (uint32_t p = first / PG; p <= (first + len - 1) / PG; p++)
		h->external[p] = true;
}

static void op_device_write(struct run *r, int d)
{
	struct harness *h = r->h;
	uint32_t first, len;
	uint8_t vals[600];
	if (!pick_run(r, true, &first, &len))
		return;
	fresh_values(r, first, len, vals);
	say(r, "device %d writes [%u, +%u)", d, first, len);
	memcpy(h->dev[d] + first, vals, len);
	model_write(r->m, d + 1, first, len, vals);
}

static void op_launch(struct run *r, int d)
{
	struct harness *h = r->h;
	say(r, "launch on device %d", d);
	/* Changes by other processes are learned at the acquire. */
	for (uint32_t p = 0; p < h->npages; p++) {
		if (h->external[p] && h->mapped[p]) {
			assert_int_equal(lrc_file_changed(&h->region, p, 1, &h->plan), 0);
			h->external[p] = false;
		}
	}
	/* The shim asks, before planning, which actions of the launch change
	 * the device's bytes (then it may wait for kernels still running
	 * there): the answer must be the plan's. */
	size_t before = h->plan.count;
	struct lrc_rebase_extent predicted_rebases;
	unsigned predicted = lrc_launch_moves(&h->region, d, &predicted_rebases);
	assert_int_equal(lrc_launch(&h->region, d, &h->plan), 0);
	unsigned moves = 0;
	uint64_t rebases = 0, runs = 0;
	for (size_t i = before; i < h->plan.count; i++) {
		if (h->plan.items[i].dev != d)
			continue;
		if (h->plan.items[i].kind == LRC_UPLOAD) {
			moves |= LRC_MOVES_UPLOAD;
		} else if (h->plan.items[i].kind == LRC_REBASE) {
			moves |= LRC_MOVES_REBASE;
			rebases += h->plan.items[i].npages;
			runs++;
		}
	}
	if (moves != predicted || rebases != predicted_rebases.pages || runs != predicted_rebases.runs)
		fail_msg("seed %llu op %ld: lrc_launch_moves said %#x and %llu pages to rebase in %llu runs, "
			 "the launch's plan has %#x and %llu in %llu (1: uploads, 2: rebases)",
			 (unsigned long long)r->seed, r->op, predicted, (unsigned long long)predicted_rebases.pages,
			 (unsigned long long)predicted_rebases.runs, moves, (unsigned long long)rebases,
			 (unsigned long long)runs);
	run_plan(h);
	model_join(r->m, d + 1, 0);
	if ((h->flags & LRC_WRITABLE) && h->epoch_age[d] < 0)
		h->epoch_age[d] = 0;
	check_equal(r, h->dev[d], r->m->view[d + 1], true, "device replica after launch");
}

static void op_sync(struct run *r, int d)
{
	struct harness *h = r->h;
	say(r, "sync device %d", d);
	assert_int_equal(lrc_sync_diff(&h->region, d, &h->plan), 0);
	run_plan(h);
	assert_int_equal(lrc_sync(&h->region, d, &h->plan), 0);
	run_plan(h);
	model_join(r->m, 0, d + 1);
	h->epoch_age[d] = -1;
	check_equal(r, h->file, r->m->view[0], false, "file after sync");
}

/* A sync of one stream while d's kernels on others still run (a snapshot
 * release): the CPU sees every write d made so far, and d's epoch goes on.
 * Refused, with nothing emitted, while a lower device has an open epoch:
 * then the shim waits for the kernels and syncs in full. */
static void op_snapshot_sync(struct run *r, int d)
{
	struct harness *h = r->h;
	bool lower_open = false;
	for (int f = 0; f < d; f++)
		lower_open |= h->epoch_age[f] >= 0;
	say(r, "snapshot sync device %d%s", d, lower_open && h->epoch_age[d] >= 0 ? " (refused)" : "");
	assert_int_equal(lrc_sync_diff(&h->region, d, &h->plan), 0);
	run_plan(h);
	int rc = lrc_sync_snapshot(&h->region, d, &h->plan);
	if (lower_open && h->epoch_age[d] >= 0) {
		assert_int_equal(rc, -EAGAIN);
		assert_int_equal(h->plan.count, 0);
		assert_int_equal(lrc_sync(&h->region, d, &h->plan), 0);
		run_plan(h);
		model_join(r->m, 0, d + 1);
		h->epoch_age[d] = -1;
	} else {
		assert_int_equal(rc, 0);
		run_plan(h);
		model_join(r->m, 0, d + 1);
	}
	check_equal(r, h->file, r->m->view[0], false, "file after a snapshot sync");
}

static void op_msync(struct run *r)
{
	say(r, "msync");
	assert_int_equal(lrc_cpu_release(&r->h->region, &r->h->plan), 0);
	run_plan(r->h);
}

static void sync_all(struct run *r)
{
	for (int d = 0; d < NDEV; d++)
		if (r->h->epoch_age[d] >= 0)
			op_sync(r, d);
}

/* munmap of part: the head, the tail or a hole (every device synced first:
 * unmapping memory a running kernel writes is the program's error). */
static void op_munmap_part(struct run *r)
{
	struct harness *h = r->h;
	if (h->nmapped < 2)
		return;
	sync_all(r);
	op_msync(r);
	uint32_t first = below(r, h->npages);
	uint32_t n = 1 + below(r, h->npages - first);
	say(r, "munmap pages [%u, +%u)", first, n);
	assert_int_equal(lrc_drop(&h->region, first, n, &h->plan), 0);
	run_plan(h);
	for (uint32_t p = first; p < first + n; p++) {
		if (h->mapped[p])
			h->nmapped--;
		h->mapped[p] = false;
	}
}

static void op_remap(struct run *r)
{
	say(r, "munmap all, mmap again");
	sync_all(r);
	op_msync(r);
	harness_close(r->h);
	harness_open(r->h);
}

static void run_one(uint64_t seed, long ops, bool verbose, uint64_t *ops_done)
{
	struct run r = {.seed = seed, .rng = seed * 0x2545f4914f6cdd1dull + 1, .verbose = verbose};
	r.m = calloc(1, sizeof(*r.m));
	r.h = calloc(1, sizeof(*r.h));
	assert_non_null(r.m);
	assert_non_null(r.h);
	struct harness *h = r.h;
	h->npages = 1 + below(&r, MAX_PAGES);
	h->flags = LRC_SHARED | (below(&r, 8) ? LRC_WRITABLE : 0);
	/* Plans carried out on bytes by the harness, or by the shim's own
	 * executor (device_exec: batching, masked merges, gathers, commits). */
	h->exec_mode = (int)(seed % 3);
	for (uint32_t b = 0; b < MAX_BYTES; b++) {
		r.m->initial[b] = h->file[b] = 0;
		r.counter[b] = (uint8_t)below(&r, 255);
	}
	for (int x = 0; x < NOWN; x++)
		memcpy(r.m->view[x], r.m->initial, sizeof(r.m->initial));
	harness_open(r.h);
	say(&r, "%u pages, %s", h->npages, (h->flags & LRC_WRITABLE) ? "writable" : "read-only");
	bool writable = h->flags & LRC_WRITABLE;

	for (r.op = 0; r.op < ops; r.op++) {
		int forced = -1;
		for (int d = 0; d < NDEV; d++) {
			if (h->epoch_age[d] >= 0 && ++h->epoch_age[d] >= MAX_EPOCH_OPS)
				forced = d;
		}
		if (forced >= 0) {
			op_sync(&r, forced);
			continue;
		}
		uint32_t dice = below(&r, 100);
		int d = (int)below(&r, NDEV);
		if (dice < 20) {
			if (writable)
				op_cpu_store(&r, false);
			else
				op_cpu_store(&r, true);
		} else if (dice < 45) {
			if (h->epoch_age[d] >= 0)
				op_device_write(&r, d);
			else
				op_launch(&r, d);
		} else if (dice < 57) {
			op_launch(&r, d);
		} else if (dice < 63) {
			op_sync(&r, d);
		} else if (dice < 69) {
			op_snapshot_sync(&r, d);
		} else if (dice < 77) {
			op_cpu_store(&r, true);
		} else if (dice < 85) {
			say(&r, "read()");
			check_equal(&r, h->file, r.m->view[0], false, "read() of the file");
			if (h->epoch_age[d] >= 0)
				check_equal(&r, h->dev[d], r.m->view[d + 1], true,
					    "device replica during its kernel");
		} else if (dice < 89) {
			op_external_write(&r);
		} else if (dice < 95) {
			op_msync(&r);
		} else if (dice < 98) {
			op_munmap_part(&r);
		} else if (h->nmapped < h->npages) {
			op_remap(&r);
		}
		if ((r.op & 63) == 63)
			model_prune(r.m);
	}
	sync_all(&r);
	check_equal(&r, h->file, r.m->view[0], false, "file at the end");
	*ops_done += (uint64_t)r.op;
	harness_close(r.h);
	lrc_plan_free(&h->plan);
	model_free(r.m);
	free(r.m);
	free(r.h);
}

static long env_long(const char *name, long dflt)
{
	const char *s = getenv(name);
	return s && *s ? strtol(s, NULL, 10) : dflt;
}

static void test_engine_agrees_with_the_model(void **state)
{
	(void)state;
	long seeds = env_long("LRC_MODEL_SEEDS", 500), ops = env_long("LRC_MODEL_OPS", 600);
	bool verbose = env_long("LRC_MODEL_VERBOSE", 0) != 0;
	uint64_t done = 0;
	if (getenv("LRC_MODEL_SEED")) {
		run_one((uint64_t)env_long("LRC_MODEL_SEED", 0), ops, verbose, &done);
	} else {
		for (long s = 0; s < seeds; s++)
			run_one((uint64_t)s, ops, verbose, &done);
	}
	printf("model test: %llu operations over %ld seeds agreed with the model\n",
	       (unsigned long long)done, getenv("LRC_MODEL_SEED") ? 1L : seeds);
	assert_true(done > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engine_agrees_with_the_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

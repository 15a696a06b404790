/* Every environment knob of GAIA (DESIGN §4), in one table.
 *
 * GAIA_ENV_TABLE below is the only place a knob is declared: the struct the
 * shim reads (struct gaia_env), the parser (runtime/env.c), the error
 * messages and the README's table (tools/gaia_envdoc.c, checked by
 * tests/unit/test_env.c) are all generated from it. Nothing else in the
 * project calls getenv for a GAIA_ variable.
 *
 * Columns, per type:
 *   INT (NAME, field, default, min, max, doc)
 *   ENUM(NAME, field, DEFAULT_WORD, doc)     words: GAIA_ENV_WORDS_<NAME>
 *   BOOL(NAME, field, default, doc)          default 0 or 1
 *   STR (NAME, field, default, accepted, check, doc)
 * NAME is the variable without its GAIA_ prefix. Numbers are plain decimal
 * literals (they are also stringified into the README). `check` names a
 * function in runtime/env.c, `const char *check(const char *value)`, that
 * returns NULL for a good value or a short reason why it is bad.
 *
 * Parsing rules (the same for every knob of a type):
 *   - An unset variable takes the default silently. A variable that is set
 *     but bad takes the default and is reported on one line.
 *   - int: optional ASCII whitespace, an optional sign, decimal digits,
 *     optional ASCII whitespace; nothing else (no hex, no suffixes, no
 *     trailing garbage; empty is bad). Values that overflow long long or
 *     fall outside [min, max] are bad. strtoll's base-10 syntax, minus
 *     its locale dependence.
 *   - bool: 0/1, yes/no, true/false, on/off, any case, surrounding ASCII
 *     whitespace ignored.
 *   - enum: one of the listed words, any case, surrounding ASCII whitespace
 *     ignored.
 *   - string: taken verbatim (no trimming); empty is a value.
 */
#ifndef GAIA_ENV_H
#define GAIA_ENV_H

#include <stddef.h>

#define GAIA_ENV_TABLE(INT, ENUM, BOOL, STR)                                            \
	INT(READAHEAD_KB, readahead_kb, 512, 4, 1048576,                                \
	    "what a CPU read served from a device (peer caching) fetches ahead, in "    \
	    "KiB: the first window; sequential reads double it up to 16 times this, "   \
	    "others halve it")                                                          \
	INT(GPU_READAHEAD_KB, gpu_readahead_kb, 2048, 64, 1048576,                      \
	    "the size of an upload's chunks, in KiB: each crosses the bus from one of " \
	    "two pinned staging buffers while the CPU fills the other; for a region "   \
	    "paged on demand, also the first window prefetched over what kernels "     \
	    "faulted on (GAIA_GPU_FAULTS): doubled after a window the learned set "     \
	    "fills and runs past, halved after one it fills less than half or ends "    \
	    "inside, from 64 KiB to 64 MiB, and the opening window ahead of the "       \
	    "fault front while kernels run; for a region read in place (pinned), "      \
	    "the chunks the file is read into the page cache in before its "           \
	    "registration, each read ahead while the one before is populated; for a "  \
	    "region read through HMM, the first window read ahead into the page "      \
	    "cache over what kernels faulted on, and ahead of the fault front, "       \
	    "adapted as for a region paged on demand")                                 \
	ENUM(GPU_FAULTS, gpu_faults, CUPTI,                                             \
	     "where the shim learns what kernels fault on in regions paged on demand " \
	     "or read through HMM, to prefetch those parts (to the device, or into "   \
	     "the page cache) before the next launch: cupti = CUPTI's "                 \
	     "unified-memory GPU_PAGE_FAULT records, read at each sync that leaves "    \
	     "the device idle and, while kernels run, every 500 us to prefetch a "      \
	     "window ahead of each fault (GAIA_GPU_READAHEAD_KB to start, doubled "     \
	     "on sequential faults, halved on others, 64 KiB to 64 MiB); learn = the "  \
	     "same records read at syncs only; off = nowhere "                          \
	     "(CUPTI left alone, for a profiler such as nsys or ncu): such regions "    \
	     "page on faults alone")                                                    \
	STR(PATHS, paths, "", "':'-separated fnmatch globs, a leading '!' excludes",    \
	    check_paths,                                                                \
	    "which files to manage: the first glob matching the path decides; a path "  \
	    "no glob matches is managed only if every glob excludes; empty = all "      \
	    "regular files")                                                            \
	INT(MIN_MAP_KB, min_map_kb, 64, 4, 1073741824,                                  \
	    "smallest mapping managed, in KiB; smaller ones pass through")              \
	ENUM(BACKING, backing, AUTO,                                                    \
	     "how kernels reach a region: a replica in driver virtual memory at the "   \
	     "same address (vmm) or in managed memory; paged = every replica in "       \
	     "managed memory that pages on demand (may exceed device memory; base "     \
	     "copies stay on the host); pinned = regions no kernel can write "          \
	     "(MAP_SHARED without PROT_WRITE) are read in place from the page cache "   \
	     "(a read-only registration; zero copy), the others as auto; host = such "  \
	     "regions are read in place through the device's own page tables (HMM: "   \
	     "PAGEABLE_MEMORY_ACCESS; nothing registered or pinned), the others, and "  \
	     "every region on a device without HMM, as auto; auto = a replica (vmm "    \
	     "where the driver allows), except a region larger than half the device's " \
	     "free memory, or with no room left for its replica: read in place if "     \
	     "read-only (through HMM where the device has it), else paged (managed: "   \
	     "such a region is paged; vmm and managed: a replica that finds no "       \
	     "device memory is); vmm, pinned, host and auto initialise the driver "    \
	     "before a CUDA program's first managed mapping")                           \
	ENUM(DIRTY_TRACKING, dirty_tracking, AUTO,                                      \
	     "how CPU writes are found: userfaultfd write-protect (uffd), soft-dirty "  \
	     "bits, or the best the kernel offers (auto)")                              \
	ENUM(RUNNING_KERNELS, running_kernels, ISOLATED,                                \
	     "a launch after the CPU changed a region, while kernels launched earlier " \
	     "still run on the device: isolated = it waits for them (they see the "     \
	     "bytes as at their own launch; one that waits for the host never ends); "  \
	     "shared = it rebases the region on the device at once (they may see the " \
	     "CPU's later bytes, as in host memory; none of their stores is lost)")     \
	INT(RELEASE_MS, release_ms, 100, 0, 3600000,                                    \
	    "how often a CPU-only process publishes its writes to the shared version "  \
	    "table, in ms; 0 = only at msync, munmap and exit")                         \
	ENUM(LOG, log, WARN,                                                            \
	     "messages printed on stderr: this level and more severe ones")             \
	STR(STATS, stats, "", "empty, 0, 1 or a file path", check_stats,                \
	    "counters at exit: empty or 0 = off, 1 = to stderr, anything else = "       \
	    "written to that file")                                                     \
	BOOL(DISABLE, disable, 0, "1 = pure pass-through: the shim manages nothing")

/* The words of each ENUM knob, in index order: W(NAME, CONSTANT, "word").
 * Each word becomes the constant GAIA_<NAME>_<CONSTANT> (its index). */
#define GAIA_ENV_WORDS_BACKING(W)                                                       \
	W(BACKING, AUTO, "auto") W(BACKING, VMM, "vmm") W(BACKING, MANAGED, "managed")  \
	W(BACKING, PINNED, "pinned") W(BACKING, PAGED, "paged") W(BACKING, HOST, "host")
#define GAIA_ENV_WORDS_GPU_FAULTS(W)                                                   \
	W(GPU_FAULTS, CUPTI, "cupti") W(GPU_FAULTS, LEARN, "learn") W(GPU_FAULTS, OFF, "off")
#define GAIA_ENV_WORDS_DIRTY_TRACKING(W)                                                \
	W(DIRTY_TRACKING, AUTO, "auto") W(DIRTY_TRACKING, UFFD, "uffd")                 \
	W(DIRTY_TRACKING, SOFTDIRTY, "softdirty")
#define GAIA_ENV_WORDS_RUNNING_KERNELS(W)                                               \
	W(RUNNING_KERNELS, ISOLATED, "isolated") W(RUNNING_KERNELS, SHARED, "shared")
/* Ordered by verbosity: a message of level L is printed when L <= GAIA_LOG. */
#define GAIA_ENV_WORDS_LOG(W)                                                           \
	W(LOG, ERROR, "error") W(LOG, WARN, "warn") W(LOG, INFO, "info")                \
	W(LOG, DEBUG, "debug")

/* --- generated declarations; nothing below names a knob ------------------ */

#define GAIA_ENV_IGNORE_(...)
#define GAIA_ENV_WORD_CONST_(NAME, CONST, word) GAIA_##NAME##_##CONST,
#define GAIA_ENV_WORD_ENUM_(NAME, field, def, doc)                                      \
	enum { GAIA_ENV_WORDS_##NAME(GAIA_ENV_WORD_CONST_) };
/* GAIA_BACKING_AUTO, GAIA_LOG_DEBUG, ... */
GAIA_ENV_TABLE(GAIA_ENV_IGNORE_, GAIA_ENV_WORD_ENUM_, GAIA_ENV_IGNORE_, GAIA_ENV_IGNORE_)
#undef GAIA_ENV_WORD_ENUM_
#undef GAIA_ENV_WORD_CONST_

/* Index of each knob in gaia_env_knobs[]: GAIA_KNOB_READAHEAD_KB, ... */
#define GAIA_ENV_ID_(NAME, ...) GAIA_KNOB_##NAME,
enum gaia_env_knob_id {
	GAIA_ENV_TABLE(GAIA_ENV_ID_, GAIA_ENV_ID_, GAIA_ENV_ID_, GAIA_ENV_ID_)
	GAIA_KNOB_COUNT
};
#undef GAIA_ENV_ID_

/* The parsed configuration: one field per knob. int knobs are long long,
 * bool and enum knobs int (an enum holds its word's index), string knobs
 * point into the environment (or at the static default) and stay valid as
 * long as the environment string does. */
#define GAIA_ENV_FIELD_INT_(NAME, field, ...) long long field;
#define GAIA_ENV_FIELD_ENUM_(NAME, field, ...) int field;
#define GAIA_ENV_FIELD_BOOL_(NAME, field, ...) int field;
#define GAIA_ENV_FIELD_STR_(NAME, field, ...) const char *field;
struct gaia_env {
	GAIA_ENV_TABLE(GAIA_ENV_FIELD_INT_, GAIA_ENV_FIELD_ENUM_, GAIA_ENV_FIELD_BOOL_,
		       GAIA_ENV_FIELD_STR_)
};
#undef GAIA_ENV_FIELD_INT_
#undef GAIA_ENV_FIELD_ENUM_
#undef GAIA_ENV_FIELD_BOOL_
#undef GAIA_ENV_FIELD_STR_

enum gaia_env_type { GAIA_ENV_INT, GAIA_ENV_ENUM, GAIA_ENV_BOOL, GAIA_ENV_STRING };

/* One knob's descriptor, for the parser and for the documentation tool. */
struct gaia_env_knob {
	const char *name;          /* full variable name, "GAIA_READAHEAD_KB" */
	enum gaia_env_type type;
	const char *type_name;     /* "int", "enum", "bool", "string" */
	size_t offset;             /* of its field in struct gaia_env */
	long long min, max;        /* int only */
	long long def;             /* int: value; enum: word index; bool: 0/1 */
	const char *def_str;       /* int, bool, string: the default as text */
	const char *const *words;  /* enum: its words, in index order */
	int nwords;
	const char *accepted;      /* plain text: "4..1048576", "auto|vmm|managed" */
	const char *doc;           /* one line */
	const char *(*check)(const char *value); /* string: NULL = good, else why */
};

extern const struct gaia_env_knob gaia_env_knobs[GAIA_KNOB_COUNT];

/* Fills every field of *out from the environment. lookup(name, arg) returns
 * a variable's value or NULL when it is unset; lookup == NULL means getenv.
 * Each set-but-bad value takes its default and is reported as exactly one
 * line written with write(2) to err_fd (none when err_fd < 0), naming the
 * variable, the value (escaped, at most 64 bytes of it), what is accepted
 * and the default used. Never allocates and never uses stdio, so the
 * preloaded library may call it at any time. Returns the number of bad
 * values. */
int gaia_env_load(struct gaia_env *out, const char *(*lookup)(const char *name, void *arg),
		  void *arg, int err_fd);

/* Fills *out with every default. */
void gaia_env_defaults(struct gaia_env *out);

/* The word of an enum knob's value, or NULL when knob is not an enum or
 * value is out of range. */
const char *gaia_env_enum_word(enum gaia_env_knob_id knob, int value);

/* A knob's default as the README shows it ("512", "auto", "0", ""). */
const char *gaia_env_default_text(const struct gaia_env_knob *k);

/* Where GAIA_STATS sends the counters at exit. */
enum gaia_env_stats_dest { GAIA_ENV_STATS_OFF, GAIA_ENV_STATS_STDERR, GAIA_ENV_STATS_FILE };
enum gaia_env_stats_dest gaia_env_stats_dest(const struct gaia_env *env);

/* The README's markdown knob table (Variable, Type, Default, Accepted,
 * Meaning), framed by one blank line before and after so that it renders
 * as a table between the README's marker comments. Writes it with a
 * terminating NUL into buf and returns its length, or -ENOSPC when it does
 * not fit in size bytes. */
int gaia_env_format_table(char *buf, size_t size);

#define GAIA_ENV_README_BEGIN "<!-- knobs:begin -->"
#define GAIA_ENV_README_END "<!-- knobs:end -->"

/* Finds the generated section of a README: the bytes after the line that is
 * exactly GAIA_ENV_README_BEGIN and before the line that is exactly
 * GAIA_ENV_README_END. Sets [*begin, *end) as offsets into text. Returns 0,
 * or -ENOENT when either marker line is missing or they are out of order. */
int gaia_env_readme_section(const char *text, size_t len, size_t *begin, size_t *end);

#endif

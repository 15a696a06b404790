/* gaiarun: run a program under libgaia.so, with GAIA's knobs given as
 * options instead of GAIA_* variables (DESIGN §4).
 *
 *   gaiarun [OPTIONS] [--] PROGRAM [ARGS...]
 *
 * Every knob of gaia_env_knobs[] (include/gaia_env.h) is an option, named
 * and read as tools/knob_option.h derives it, and its value is validated
 * against the knob's descriptor, so a bad value stops here with a message
 * instead of being replaced by the default in the preloaded library.
 * libgaia.so is put first in LD_PRELOAD (existing entries are kept) and
 * PROGRAM is execvp()ed; --dry-run prints the changes instead. The first
 * word that is not an option (or the word after "--") is PROGRAM: its own
 * options are never gaiarun's.
 *
 * Exit status: that of PROGRAM; 0 for --help, --version and --dry-run; 2
 * for a usage error or a bad option value; 126 when PROGRAM cannot be
 * executed (EACCES); 127 when libgaia.so is not found or PROGRAM cannot be
 * run.
 */
#include "gaia_env.h"
#include "knob_option.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Given by CMakeLists.txt, from project(VERSION) and the install layout
 * (cmake/GaiaInstall.cmake). */
#if !defined(GAIA_VERSION) || !defined(GAIA_SONAME) || !defined(GAIA_LIBDIR_FROM_BINDIR)
#error "GAIA_VERSION, GAIA_SONAME and GAIA_LIBDIR_FROM_BINDIR come from the build"
#endif

#define EXIT_USAGE 2
#define EXIT_CANNOT_EXECUTE 126
#define EXIT_NOT_FOUND 127

/* getopt_long values: knob options are OPT_KNOB + their knob id. */
enum { OPT_KNOB = 256, OPT_LIB = 512, OPT_DRY_RUN, OPT_VERSION, OPT_HELP = 'h' };

/* Every knob's option, in table order (main fills it). */
static struct knob_option knob_options[GAIA_KNOB_COUNT];

static const char *const launcher_usage[] = {
	"[--lib=PATH]", "[--dry-run]", "[--version]", "[--help]", "[--] PROGRAM [ARGS...]",
};

#define HELP_LEFT 23  /* column where an option's description starts */
#define HELP_WIDTH 79
#define SYNOPSIS_LEFT 15 /* strlen("usage: gaiarun ") */

/* "usage: gaiarun [--readahead=SIZE] ... [--] PROGRAM [ARGS...]", one item
 * per knob option then the launcher's, wrapped to HELP_WIDTH columns. */
static void print_synopsis(FILE *out)
{
	char item[96];
	int col = fprintf(out, "usage: gaiarun");
	size_t n_launcher = sizeof launcher_usage / sizeof *launcher_usage;

	for (size_t i = 0; i < GAIA_KNOB_COUNT + n_launcher; i++) {
		const char *text = item;
		int len;

		if (i < GAIA_KNOB_COUNT) {
			char usage[sizeof item - 2];

			knob_option_usage(&knob_options[i], usage, sizeof usage);
			snprintf(item, sizeof item, "[%s]", usage);
		} else {
			text = launcher_usage[i - GAIA_KNOB_COUNT];
		}
		len = (int)strlen(text);
		if (col + 1 + len > HELP_WIDTH)
			col = fprintf(out, "\n%*s", SYNOPSIS_LEFT - 1, "") - 1;
		col += fprintf(out, " %s", text);
	}
	fputc('\n', out);
}

/* Prints "  LEFT  text" with text wrapped at spaces to HELP_WIDTH columns,
 * continuation lines indented to HELP_LEFT. */
static void print_wrapped(const char *left, const char *text)
{
	int col = printf("  %-*s", HELP_LEFT - 3, left);

	while (*text) {
		size_t word = strcspn(text, " ");

		if (col > HELP_LEFT && col + 1 + (int)word > HELP_WIDTH)
			col = printf("\n%*s", HELP_LEFT, "") - 1;
		else if (col > HELP_LEFT - 1)
			col += printf(" ");
		else
			col += printf("%*s", HELP_LEFT - col, "");
		col += printf("%.*s", (int)word, text);
		text += word;
		while (*text == ' ')
			text++;
	}
	putchar('\n');
}

static void print_help(void)
{
	char left[96], text[4096];

	print_synopsis(stdout);
	fputs("\nRuns PROGRAM with libgaia.so first in LD_PRELOAD and the GAIA_* variables\n"
	      "the options below set; variables already in the environment are kept unless\n"
	      "an option sets them. The first word that is not an option is PROGRAM\n"
	      "(looked up in $PATH), and the words after it are its own; \"--\" before\n"
	      "PROGRAM is accepted, and needed when PROGRAM begins with '-'.\n"
	      "\nKnobs (one per GAIA_* variable, libgaia(7)):\n",
	      stdout);
	for (int i = 0; i < GAIA_KNOB_COUNT; i++) {
		knob_option_usage(&knob_options[i], left, sizeof left);
		knob_option_describe(&knob_options[i], text, sizeof text);
		print_wrapped(left, text);
	}
	fputs("\nLauncher:\n", stdout);
	print_wrapped("--lib=PATH",
		      "the libgaia.so to preload. Without it: $GAIA_LIB, then <dir of "
		      "gaiarun>/" GAIA_LIBDIR_FROM_BINDIR "/" GAIA_SONAME " (an installed "
		      "tree), then <dir of gaiarun>/../libgaia.so (a build tree). A --lib or "
		      "$GAIA_LIB that does not exist is an error.");
	print_wrapped("--dry-run", "print the variables set (NAME=value, one a line) and the "
				   "command, shell-quoted, instead of running it.");
	print_wrapped("--version", "print gaiarun's version and exit.");
	print_wrapped("-h, --help", "print this help and exit.");
	print_wrapped("--", "ends the options: the next word is PROGRAM, even one that "
			    "begins with '-'.");
	fputs("\nExit status: PROGRAM's; 2 usage error or bad value; 126 PROGRAM not\n"
	      "executable; 127 libgaia.so not found or PROGRAM cannot be run.\n",
	      stdout);
}

static void usage_error(void)
{
	print_synopsis(stderr);
	fputs("Try 'gaiarun --help' for more information.\n", stderr);
	exit(EXIT_USAGE);
}

/* SIZE: decimal digits, then nothing (bytes) or one of K, KiB, M, MiB, G,
 * GiB in any case. Stores the size in KiB. Returns 0, -EINVAL (syntax),
 * -ERANGE (does not fit in 64 bits of bytes) or -EDOM (not whole KiB). */
static int parse_size_kib(const char *s, unsigned long long *kib)
{
	static const struct {
		const char *suffix;
		unsigned long long bytes;
	} units[] = {
		{ "", 1ULL },           { "K", 1ULL << 10 }, { "KiB", 1ULL << 10 },
		{ "M", 1ULL << 20 },    { "MiB", 1ULL << 20 }, { "G", 1ULL << 30 },
		{ "GiB", 1ULL << 30 },
	};
	unsigned long long n = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (n > (ULLONG_MAX - d) / 10)
			return -ERANGE;
		n = n * 10 + d;
	}
	for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
		if (strcasecmp(p, units[i].suffix) != 0)
			continue;
		if (n > ULLONG_MAX / units[i].bytes)
			return -ERANGE;
		n *= units[i].bytes;
		if (n % 1024 != 0)
			return -EDOM;
		*kib = n / 1024;
		return 0;
	}
	return -EINVAL;
}

/* N: an optional '-', then decimal digits. Returns 0, -EINVAL (syntax) or
 * -ERANGE (does not fit in long long). */
static int parse_int(const char *s, long long *value)
{
	int negative = *s == '-';
	unsigned long long n = 0, limit = negative ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
	const char *p = s + negative;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (n > (limit - d) / 10)
			return -ERANGE;
		n = n * 10 + d;
	}
	if (*p != '\0')
		return -EINVAL;
	*value = negative ? (long long)(0 - n) : (long long)n;
	return 0;
}

/* The value option o's text gives its variable: validated, normalised
 * (sizes in KiB, words in their canonical case) into buf where needed.
 * Exits with a message naming the option, the value and what is accepted
 * when the value is bad. */
static const char *option_value(const struct knob_option *o, const char *arg, char *buf,
				size_t size)
{
	const struct gaia_env_knob *k = &gaia_env_knobs[o->knob];
	char range[128];
	unsigned long long kib;
	long long n;
	const char *why;
	int rc;

	if (!arg)
		return o->bare;
	switch (o->kind) {
	case VALUE_SIZE_KB:
		format_size_range(range, sizeof range, k);
		rc = parse_size_kib(arg, &kib);
		if (rc == -EINVAL) {
			fprintf(stderr,
				"gaiarun: --%s=%s: not a size (bytes, or a number with K, KiB, "
				"M, MiB, G or GiB); accepted %s\n",
				o->name, arg, range);
			exit(EXIT_USAGE);
		}
		if (rc == -EDOM) {
			fprintf(stderr,
				"gaiarun: --%s=%s: not a whole number of KiB; accepted %s\n",
				o->name, arg, range);
			exit(EXIT_USAGE);
		}
		if (rc == -ERANGE || kib < (unsigned long long)k->min ||
		    kib > (unsigned long long)k->max) {
			fprintf(stderr, "gaiarun: --%s=%s: out of range; accepted %s\n",
				o->name, arg, range);
			exit(EXIT_USAGE);
		}
		snprintf(buf, size, "%llu", kib);
		return buf;
	case VALUE_INT:
		rc = parse_int(arg, &n);
		if (rc == -EINVAL) {
			fprintf(stderr,
				"gaiarun: --%s=%s: not a decimal integer; accepted %s (%s)\n",
				o->name, arg, k->accepted, k->name);
			exit(EXIT_USAGE);
		}
		if (rc == -ERANGE || n < k->min || n > k->max) {
			fprintf(stderr, "gaiarun: --%s=%s: out of range; accepted %s (%s)\n",
				o->name, arg, k->accepted, k->name);
			exit(EXIT_USAGE);
		}
		snprintf(buf, size, "%lld", n);
		return buf;
	case VALUE_WORD:
		for (int i = 0; i < k->nwords; i++)
			if (strcasecmp(arg, k->words[i]) == 0)
				return k->words[i];
		fprintf(stderr, "gaiarun: --%s=%s: not one of %s\n", o->name, arg,
			k->accepted);
		exit(EXIT_USAGE);
	case VALUE_STRING:
		why = k->check ? k->check(arg) : NULL;
		if (why) {
			fprintf(stderr, "gaiarun: --%s=%s: %s; accepted %s\n", o->name, arg, why,
				k->accepted);
			exit(EXIT_USAGE);
		}
		return arg;
	case VALUE_FLAG:
		break;
	}
	return o->bare;
}

static int is_regular_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* path made absolute and free of "." and ".." and of symbolic links in its
 * directories, in a malloc'd string; the file's own name is kept, so that
 * LD_PRELOAD names lib/libgaia.so.0 (the soname, which an upgrade moves)
 * rather than the file it links to. NULL with errno set on failure. */
static char *absolute_path(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	char *dir, *real_dir, *out;
	size_t dir_len = slash ? (size_t)(slash - path) : 0;

	dir = slash ? strndup(path, dir_len ? dir_len : 1) : strdup(".");
	if (!dir)
		return NULL;
	real_dir = realpath(dir, NULL);
	free(dir);
	if (!real_dir)
		return NULL;
	out = malloc(strlen(real_dir) + 1 + strlen(base) + 1);
	if (out)
		sprintf(out, "%s/%s", strcmp(real_dir, "/") == 0 ? "" : real_dir, base);
	free(real_dir);
	return out;
}

/* The libgaia.so to preload, as an absolute path in a malloc'd string.
 * An explicit choice (--lib, else $GAIA_LIB) is the only candidate: running
 * with some other library than the one asked for would hide the mistake.
 * Otherwise the installed layout (<exe dir>/../lib/libgaia.so.0, as the
 * build's install rules place them) comes before the build tree's
 * (<exe dir>/../libgaia.so, gaiarun being <build>/tools/gaiarun). Exits
 * 127 naming every path tried when none exists. */
static char *find_library(const char *lib_option)
{
	const char *explicit_lib = lib_option;
	const char *source = "--lib";
	char candidates[2][PATH_MAX + 64];
	const char *tried[2];
	int ntried = 0;
	char *resolved;

	if (!explicit_lib) {
		explicit_lib = getenv("GAIA_LIB");
		source = "GAIA_LIB";
		if (explicit_lib && *explicit_lib == '\0')
			explicit_lib = NULL;
	}
	if (explicit_lib) {
		struct stat st;
		const char *why = NULL;

		if (stat(explicit_lib, &st) != 0)
			why = strerror(errno);
		else if (!S_ISREG(st.st_mode))
			why = "not a regular file";
		if (why) {
			fprintf(stderr, "gaiarun: libgaia.so not found; tried: %s (from %s): %s\n",
				explicit_lib, source, why);
			exit(EXIT_NOT_FOUND);
		}
		tried[ntried++] = explicit_lib;
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		char *slash;

		if (n < 0) {
			fprintf(stderr,
				"gaiarun: libgaia.so not found: cannot read /proc/self/exe (%s); "
				"give --lib or GAIA_LIB\n",
				strerror(errno));
			exit(EXIT_NOT_FOUND);
		}
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash)
			*slash = '\0';
		snprintf(candidates[0], sizeof candidates[0], "%s/%s/%s", exe,
			 GAIA_LIBDIR_FROM_BINDIR, GAIA_SONAME);
		snprintf(candidates[1], sizeof candidates[1], "%s/../libgaia.so", exe);
		tried[ntried++] = candidates[0];
		tried[ntried++] = candidates[1];
	}
	for (int i = 0; i < ntried; i++) {
		if (!is_regular_file(tried[i]))
			continue;
		resolved = absolute_path(tried[i]);
		if (!resolved) {
			fprintf(stderr, "gaiarun: %s: %s\n", tried[i], strerror(errno));
			exit(EXIT_NOT_FOUND);
		}
		/* ld.so splits LD_PRELOAD at ':' and ' ' (ld.so(8)). */
		if (strpbrk(resolved, ": ")) {
			fprintf(stderr,
				"gaiarun: %s: LD_PRELOAD cannot carry a path with ':' or ' '\n",
				resolved);
			exit(EXIT_USAGE);
		}
		return resolved;
	}
	fprintf(stderr, "gaiarun: libgaia.so not found; tried:");
	for (int i = 0; i < ntried; i++)
		fprintf(stderr, " %s", tried[i]);
	fprintf(stderr, " (give --lib=PATH or set GAIA_LIB)\n");
	exit(EXIT_NOT_FOUND);
}

/* Prints s as one shell word: unquoted when it is only safe characters,
 * else in single quotes with each ' written as '\''. */
static void print_shell_word(const char *s)
{
	static const char safe[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				   "0123456789_@%+=:,./-";

	if (*s != '\0' && s[strspn(s, safe)] == '\0') {
		fputs(s, stdout);
		return;
	}
	putchar('\'');
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*s);
	}
	putchar('\'');
}

static void print_assignment(const char *name, const char *value)
{
	printf("%s=", name);
	print_shell_word(value);
	putchar('\n');
}

int main(int argc, char **argv)
{
	struct option longopts[GAIA_KNOB_COUNT + 5];
	const char *values[GAIA_KNOB_COUNT] = { 0 };
	char value_buf[GAIA_KNOB_COUNT][32];
	const char *lib_option = NULL;
	int dry_run = 0;
	const char *old_preload;
	char *lib, *preload;
	size_t n = 0;
	int c;

	for (int i = 0; i < GAIA_KNOB_COUNT; i++) {
		knob_option_of((enum gaia_env_knob_id)i, &knob_options[i]);
		longopts[n++] = (struct option){ knob_options[i].name, knob_options[i].has_arg,
						 NULL, OPT_KNOB + i };
	}
	longopts[n++] = (struct option){ "lib", required_argument, NULL, OPT_LIB };
	longopts[n++] = (struct option){ "dry-run", no_argument, NULL, OPT_DRY_RUN };
	longopts[n++] = (struct option){ "version", no_argument, NULL, OPT_VERSION };
	longopts[n++] = (struct option){ "help", no_argument, NULL, OPT_HELP };
	longopts[n] = (struct option){ 0 };

	/* getopt's own messages are prefixed with argv[0]. */
	argv[0] = (char *)"gaiarun";
	/* '+': stop at the first non-option (PROGRAM) or after "--". */
	while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
		if (c >= OPT_KNOB && c < OPT_KNOB + GAIA_KNOB_COUNT) {
			const struct knob_option *o = &knob_options[c - OPT_KNOB];

			values[o->knob] = option_value(o, optarg, value_buf[o->knob],
						       sizeof value_buf[0]);
		} else if (c == OPT_LIB) {
			lib_option = optarg;
		} else if (c == OPT_DRY_RUN) {
			dry_run = 1;
		} else if (c == OPT_VERSION) {
			printf("gaiarun %s\n", GAIA_VERSION);
			return fflush(stdout) == 0 ? 0 : 1;
		} else if (c == OPT_HELP) {
			print_help();
			return 0;
		} else {
			usage_error();
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "gaiarun: missing the program to run\n");
		usage_error();
	}

	lib = find_library(lib_option);
	old_preload = getenv("LD_PRELOAD");
	if (old_preload && *old_preload) {
		preload = malloc(strlen(lib) + 1 + strlen(old_preload) + 1);
		if (preload)
			sprintf(preload, "%s:%s", lib, old_preload);
	} else {
		preload = strdup(lib);
	}
	if (!preload) {
		fprintf(stderr, "gaiarun: out of memory\n");
		return EXIT_NOT_FOUND;
	}

	for (int k = 0; k < GAIA_KNOB_COUNT; k++) {
		if (!values[k])
			continue;
		if (dry_run) {
			print_assignment(gaia_env_knobs[k].name, values[k]);
		} else if (setenv(gaia_env_knobs[k].name, values[k], 1) != 0) {
			fprintf(stderr, "gaiarun: cannot set %s: %s\n", gaia_env_knobs[k].name,
				strerror(errno));
			return EXIT_NOT_FOUND;
		}
	}
	if (dry_run) {
		print_assignment("LD_PRELOAD", preload);
		for (int i = optind; i < argc; i++) {
			if (i > optind)
				putchar(' ');
			print_shell_word(argv[i]);
		}
		putchar('\n');
		free(preload);
		free(lib);
		return fflush(stdout) == 0 ? 0 : 1;
	}
	if (setenv("LD_PRELOAD", preload, 1) != 0) {
		fprintf(stderr, "gaiarun: cannot set LD_PRELOAD: %s\n", strerror(errno));
		return EXIT_NOT_FOUND;
	}
	free(preload); /* setenv copied it */
	execvp(argv[optind], argv + optind);
	c = errno;
	free(lib);
	fprintf(stderr, "gaiarun: cannot run %s: %s\n", argv[optind], strerror(c));
	return c == EACCES ? EXIT_CANNOT_EXECUTE : EXIT_NOT_FOUND;
}

/* The gaiarun launcher (tools/gaiarun.c), run as a real program: the GAIA_*
 * variables its options set, LD_PRELOAD, the errors and exit statuses, the
 * order libgaia.so is looked for in, and a real exec. The binary is
 * $GAIA_BUILD_DIR/tools/gaiarun, else <build>/tools/gaiarun where this test
 * is <build>/tests/test_gaiarun. GAIA_VERSION and GAIA_SONAME are gaiarun's
 * own (CMakeLists.txt gives both programs the same). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static char build_dir[PATH_MAX];
static char gaiarun[PATH_MAX + 32];
static char tmp_template[] = "/tmp/test_gaiarun.XXXXXX";
static char tmp_dir[PATH_MAX]; /* tmp_template made, without symlinks */
static char dummy_lib[PATH_MAX]; /* a file that exists, never loaded */
static char dummy_lib2[PATH_MAX];

/* What one run of gaiarun printed and how it ended. */
struct run {
	char out[65536];
	char err[16384];
	int status; /* exit status, or 128 + signal */
};

/* snprintf that fails the test instead of truncating. */
__attribute__((format(printf, 3, 4))) static void xsnprintf(char *buf, size_t size,
							     const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < size);
}

/* --- running gaiarun ----------------------------------------------------- */

static void read_all(int fd, char *buf, size_t size)
{
	size_t len = 0;
	ssize_t r;

	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	while (len + 1 < size && (r = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)r;
	buf[len] = '\0';
	close(fd);
}

/* Every GAIA_* variable and LD_PRELOAD removed, so that the parent's
 * environment cannot leak into what a test sees. */
static void clean_environment(void)
{
	char names[256][128];
	int n = 0;

	for (char **e = environ; *e && n < 256; e++) {
		size_t len = strcspn(*e, "=");

		if ((strncmp(*e, "GAIA_", 5) == 0 || strncmp(*e, "LD_PRELOAD=", 11) == 0) &&
		    len < sizeof names[0]) {
			memcpy(names[n], *e, len);
			names[n++][len] = '\0';
		}
	}
	for (int i = 0; i < n; i++)
		unsetenv(names[i]);
}

/* Runs exe with args (NULL-terminated) in a clean environment plus env
 * ("NAME=value" strings, NULL-terminated; may be NULL). */
static void run_exe(struct run *r, const char *exe, const char *const *env,
		    const char *const *args)
{
	char out_path[] = "/tmp/test_gaiarun.out.XXXXXX";
	char err_path[] = "/tmp/test_gaiarun.err.XXXXXX";
	int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path), wstatus;
	const char *argv[64];
	int argc = 0;
	pid_t pid;

	assert_true(out_fd >= 0 && err_fd >= 0);
	unlink(out_path);
	unlink(err_path);
	argv[argc++] = exe;
	for (; args && *args; args++) {
		assert_true(argc < 63);
		argv[argc++] = *args;
	}
	argv[argc] = NULL;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		clean_environment();
		for (; env && *env; env++)
			putenv((char *)*env);
		dup2(out_fd, 1);
		dup2(err_fd, 2);
		execv(exe, (char *const *)argv);
		_exit(99);
	}
	assert_int_equal(waitpid(pid, &wstatus, 0), pid);
	r->status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
	read_all(out_fd, r->out, sizeof r->out);
	read_all(err_fd, r->err, sizeof r->err);
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define ENV(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void run_gaiarun(struct run *r, const char *const *env, const char *const *args)
{
	run_exe(r, gaiarun, env, args);
}

/* The one line of text that starts with prefix, copied into line (without
 * its newline); fails the test when there is none or more than one. */
static void find_line(const char *text, const char *prefix, char *line, size_t size)
{
	const char *found = NULL;
	size_t plen = strlen(prefix);

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		if (len >= plen && strncmp(p, prefix, plen) == 0) {
			if (found)
				fail_msg("two lines start with '%s' in:\n%s", prefix, text);
			found = p;
			assert_true(len < size);
			memcpy(line, p, len);
			line[len] = '\0';
		}
		p += len + (nl ? 1 : 0);
	}
	if (!found)
		fail_msg("no line starts with '%s' in:\n%s", prefix, text);
}

/* Asserts that text has the line "NAME=value" exactly. */
static void assert_var(const char *text, const char *name, const char *value)
{
	char prefix[256], line[8192];

	xsnprintf(prefix, sizeof prefix, "%s=", name);
	find_line(text, prefix, line, sizeof line);
	if (strcmp(line + strlen(prefix), value) != 0)
		fail_msg("%s is '%s', expected '%s'", name, line + strlen(prefix), value);
}

static void assert_no_var(const char *text, const char *name)
{
	char prefix[256];

	xsnprintf(prefix, sizeof prefix, "%s=", name);
	for (const char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, prefix, strlen(prefix)) == 0)
			fail_msg("%s set unexpectedly in:\n%s", name, text);
}

static void assert_contains(const char *text, const char *needle)
{
	if (!strstr(text, needle))
		fail_msg("'%s' not found in:\n%s", needle, text);
}

/* The readahead size in KiB that --readahead=size sets. */
static void assert_readahead(const char *size, const char *kib)
{
	struct run r;
	char opt[128];

	xsnprintf(opt, sizeof opt, "--readahead=%s", size);
	run_gaiarun(&r, NULL, ARGS("--lib", dummy_lib, opt, "--dry-run", "--", "true"));
	if (r.status != 0)
		fail_msg("--readahead=%s: exit %d: %s", size, r.status, r.err);
	assert_var(r.out, "GAIA_READAHEAD_KB", kib);
}

/* A bad value: exit 2, nothing on stdout, a message naming the option and
 * the value (and more, in want). */
static void assert_bad_value(const char *opt, const char *value, const char *want)
{
	struct run r;
	char arg[256], named[256];

	xsnprintf(arg, sizeof arg, "%s=%s", opt, value);
	run_gaiarun(&r, NULL, ARGS("--lib", dummy_lib, arg, "--dry-run", "--", "true"));
	if (r.status != 2)
		fail_msg("%s: exit %d, expected 2; stderr: %s", arg, r.status, r.err);
	assert_string_equal(r.out, "");
	xsnprintf(named, sizeof named, "%s=%s:", opt, value);
	assert_contains(r.err, named);
	if (want)
		assert_contains(r.err, want);
}

/* --- setup --------------------------------------------------------------- */

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static int setup(void **state)
{
	const char *env = getenv("GAIA_BUILD_DIR");
	struct stat st;

	if (env && *env) {
		xsnprintf(build_dir, sizeof build_dir, "%s", env);
	} else {
		ssize_t n = readlink("/proc/self/exe", build_dir, sizeof build_dir - 1);
		char *slash;

		if (n < 0)
			return -1;
		build_dir[n] = '\0';
		/* <build>/tests/test_gaiarun -> <build> */
		for (int i = 0; i < 2; i++) {
			slash = strrchr(build_dir, '/');
			if (!slash)
				return -1;
			*slash = '\0';
		}
	}
	xsnprintf(gaiarun, sizeof gaiarun, "%s/tools/gaiarun", build_dir);
	if (stat(gaiarun, &st) != 0) {
		fprintf(stderr, "test_gaiarun: %s: %s\n", gaiarun, strerror(errno));
		return -1;
	}
	if (!mkdtemp(tmp_template) || !realpath(tmp_template, tmp_dir))
		return -1;
	xsnprintf(dummy_lib, sizeof dummy_lib, "%s/dummy1.so", tmp_dir);
	xsnprintf(dummy_lib2, sizeof dummy_lib2, "%s/dummy2.so", tmp_dir);
	write_file(dummy_lib, "not a library\n", 0644);
	write_file(dummy_lib2, "not a library\n", 0644);
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	xsnprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* --- sizes ----------------------------------------------------------------- */

static void test_sizes_convert_to_kib(void **state)
{
	assert_readahead("4096", "4");
	assert_readahead("4K", "4");
	assert_readahead("64KiB", "64");
	assert_readahead("1M", "1024");
	assert_readahead("3MiB", "3072");
	assert_readahead("1G", "1048576");
	assert_readahead("1GiB", "1048576");
	assert_readahead("2m", "2048");
	assert_readahead("1048576", "1024");
}

static void test_gpu_readahead_sets_its_own_knob(void **state)
{
	struct run r;

	run_gaiarun(&r, NULL,
		    ARGS("--lib", dummy_lib, "--gpu-readahead=4M", "--dry-run", "--", "true"));
	assert_int_equal(r.status, 0);
	assert_var(r.out, "GAIA_GPU_READAHEAD_KB", "4096");
	assert_no_var(r.out, "GAIA_READAHEAD_KB");
}

static void test_size_out_of_range_names_option_value_and_range(void **state)
{
	assert_bad_value("--readahead", "1K", "4K..1G");
	assert_bad_value("--readahead", "2G", "4K..1G");
	assert_bad_value("--readahead", "2048", "GAIA_READAHEAD_KB 4..1048576");
	assert_bad_value("--gpu-readahead", "32K", "64K..1G");
	assert_bad_value("--readahead", "99999999999999999999999", "4K..1G");
	assert_bad_value("--readahead", "18014398509481984K", "4K..1G");
}

static void test_malformed_size_is_an_error(void **state)
{
	assert_bad_value("--readahead", "abc", "not a size");
	assert_bad_value("--readahead", "", "not a size");
	assert_bad_value("--readahead", "-4K", "not a size");
	assert_bad_value("--readahead", "1.5M", "not a size");
	assert_bad_value("--readahead", "4KB", "not a size");
	assert_bad_value("--readahead", "4 K", "not a size");
	assert_bad_value("--readahead", "0x1000", "not a size");
	assert_bad_value("--readahead", "5000", "not a whole number of KiB");
	assert_bad_value("--gpu-readahead", "1T", "64K..1G");
}

/* --- the other knobs ------------------------------------------------------- */

static void test_stats_without_path_is_stderr(void **state)
{
	struct run r;

	run_gaiarun(&r, NULL, ARGS("--lib", dummy_lib, "--stats", "--dry-run", "--", "true"));
	assert_int_equal(r.status, 0);
	assert_var(r.out, "GAIA_STATS", "1");
}

static void test_stats_with_path_writes_there(void **state)
{
	struct run r;

	run_gaiarun(&r, NULL,
		    ARGS("--lib", dummy_lib, "--stats=/tmp/gaia.stats", "--dry-run", "--", "true"));
	assert_int_equal(r.status, 0);
	assert_var(r.out, "GAIA_STATS", "/tmp/gaia.stats");
}

static void test_words_flags_and_globs(void **state)
{
	struct run r;

	run_gaiarun(&r, NULL,
		    ARGS("--lib", dummy_lib, "--log=DEBUG", "--backing=vmm", "--disable",
			 "--paths=/data/*.bin:!/data/tmp*", "--dry-run", "--", "true"));
	if (r.status != 0)
		fail_msg("exit %d: %s", r.status, r.err);
	assert_var(r.out, "GAIA_LOG", "debug");
	assert_var(r.out, "GAIA_BACKING", "vmm");
	assert_var(r.out, "GAIA_DISABLE", "1");
	/* shell-quoted: '*' and '!' are special */
	assert_var(r.out, "GAIA_PATHS", "'/data/*.bin:!/data/tmp*'");
	/* knobs not given are not set */
	assert_no_var(r.out, "GAIA_STATS");
	assert_no_var(r.out, "GAIA_READAHEAD_KB");
}

/* The knobs gaiarun had no option for before its options came from the
 * knob table. */
static void test_every_knob_has_an_option(void **state)
{
	struct run r;

	run_gaiarun(&r, NULL,
		    ARGS("--lib", dummy_lib, "--min-map=1M", "--dirty-tracking=SoftDirty",
			 "--release-ms=0", "--dry-run", "true"));
	if (r.status != 0)
		fail_msg("exit %d: %s", r.status, r.err);
	assert_var(r.out, "GAIA_MIN_MAP_KB", "1024");
	assert_var(r.out, "GAIA_DIRTY_TRACKING", "softdirty");
	assert_var(r.out, "GAIA_RELEASE_MS", "0");

	run_gaiarun(&r, NULL, ARGS("--lib", dummy_lib, "--release-ms=3600000", "--dry-run", "true"));
	assert_int_equal(r.status, 0);
	assert_var(r.out, "GAIA_RELEASE_MS", "3600000");
}

static void test_bad_integers_are_errors(void **state)
{
	assert_bad_value("--release-ms", "-1", "out of range; accepted 0..3600000 (GAIA_RELEASE_MS)");
	assert_bad_value("--release-ms", "3600001", "out of range");
	assert_bad_value("--release-ms", "99999999999999999999", "out of range");
	assert_bad_value("--release-ms", "1s", "not a decimal integer");
	assert_bad_value("--release-ms", "", "not a decimal integer");
	assert_bad_value("--release-ms", " 5", "not a decimal integer");
	assert_bad_value("--min-map", "2K", "4K..1024G");
	assert_bad_value("--dirty-tracking", "pte", "auto|uffd|softdirty");
}

static void test_bad_words_and_globs_are_errors(void **state)
{
	assert_bad_value("--backing", "cuda", "auto|vmm|managed");
	assert_bad_value("--log", "loud", "error|warn|info|debug");
	assert_bad_value("--paths", "/a::/b", "empty glob");
}

/* --- LD_PRELOAD and the command ---------------------------------------------- */

static void test_ld_preload_set_when_absent(void **state)
{
	struct run r;

	run_gaiarun(&r, NULL, ARGS("--lib", dummy_lib, "--dry-run", "--", "true"));
	assert_int_equal(r.status, 0);
	assert_var(r.out, "LD_PRELOAD", dummy_lib);
}

static void test_ld_preload_prepends_keeping_entries(void **state)
{
	struct run r;
	char want[PATH_MAX + 64];

	run_gaiarun(&r, ENV("LD_PRELOAD=/opt/a.so:/opt/b.so"),
		    ARGS("--lib", dummy_lib, "--dry-run", "--", "true"));
	assert_int_equal(r.status, 0);
	xsnprintf(want, sizeof want, "%s:/opt/a.so:/opt/b.so", dummy_lib);
	assert_var(r.out, "LD_PRELOAD", want);

	run_gaiarun(&r, ENV("LD_PRELOAD="), ARGS("--lib", dummy_lib, "--dry-run", "--", "true"));
	assert_int_equal(r.status, 0);
	assert_var(r.out, "LD_PRELOAD", dummy_lib);
}

/* After the variables, the command: one line, shell-quoted, the program's
 * own options left alone. */
static void test_dry_run_prints_the_command_last(void **state)
{
	struct run r;
	const char *last;

	run_gaiarun(&r, NULL,
		    ARGS("--lib", dummy_lib, "--readahead=1M", "--dry-run", "--", "prog", "--stats",
			 "a b", "it's"));
	assert_int_equal(r.status, 0);
	assert_int_equal(r.out[strlen(r.out) - 1], '\n');
	r.out[strlen(r.out) - 1] = '\0';
	last = strrchr(r.out, '\n');
	assert_non_null(last);
	assert_string_equal(last + 1, "prog --stats 'a b' 'it'\\''s'");
	/* the program's --stats is not gaiarun's */
	assert_no_var(r.out, "GAIA_STATS");
}

/* --- usage errors -------------------------------------------------------------- */

static void assert_usage_error(const char *const *args, const char *why)
{
	struct run r;

	run_gaiarun(&r, NULL, args);
	if (r.status != 2)
		fail_msg("exit %d, expected 2; stderr: %s", r.status, r.err);
	assert_string_equal(r.out, "");
	assert_contains(r.err, "usage: gaiarun");
	assert_contains(r.err, why);
}

static void test_unknown_option_is_usage_error(void **state)
{
	assert_usage_error(ARGS("--lib", dummy_lib, "--frobnicate", "--", "true"), "--frobnicate");
	assert_usage_error(ARGS("--lib", dummy_lib, "--disable=1", "--", "true"), "--disable");
	assert_usage_error(ARGS("--lib", dummy_lib, "-x", "--", "true"), "'x'");
}

static void test_missing_program_is_usage_error(void **state)
{
	assert_usage_error(ARGS("--lib", dummy_lib, "--dry-run"), "missing the program");
	assert_usage_error(ARGS("--lib", dummy_lib, "--dry-run", "--"), "missing the program");
	assert_usage_error(ARGS("--lib", dummy_lib, "--stats"), "missing the program");
}

/* The first word that is not an option is the program, "--" or not; the
 * words after it are its own, options included. */
static void test_program_starts_at_the_first_non_option(void **state)
{
	struct run r;
	const char *last;

	run_gaiarun(&r, NULL,
		    ARGS("--lib", dummy_lib, "--dry-run", "--log=info", "prog", "--stats", "--",
			 "--lib=x"));
	if (r.status != 0)
		fail_msg("exit %d: %s", r.status, r.err);
	assert_var(r.out, "GAIA_LOG", "info");
	assert_no_var(r.out, "GAIA_STATS");
	last = strrchr(r.out, '\n');
	assert_non_null(last);
	assert_int_equal(last[1], '\0');
	while (last > r.out && last[-1] != '\n')
		last--;
	assert_string_equal(last, "prog --stats -- --lib=x\n");

	/* --stats takes its PATH only after '=': the next word is the program */
	run_gaiarun(&r, NULL, ARGS("--lib", dummy_lib, "--dry-run", "--stats", "prog"));
	assert_int_equal(r.status, 0);
	assert_var(r.out, "GAIA_STATS", "1");
	assert_contains(r.out, "\nprog\n");

	/* "--" taken as the value of --lib is not the separator: it is the
	 * library, which does not exist */
	run_gaiarun(&r, NULL, ARGS("--lib", "--", "--dry-run", "true"));
	assert_int_equal(r.status, 127);
	assert_contains(r.err, "tried: -- (from --lib)");

	/* a program whose name begins with '-' needs "--" */
	assert_usage_error(ARGS("--lib", dummy_lib, "--dry-run", "-prog"), "'p'");
	run_gaiarun(&r, NULL, ARGS("--lib", dummy_lib, "--dry-run", "--", "-prog"));
	assert_int_equal(r.status, 0);
	assert_contains(r.out, "\n-prog\n");
}

/* --version: the project's version, on stdout, and nothing else. */
static void test_version_is_the_projects(void **state)
{
	struct run r;
	char want[64];

	run_gaiarun(&r, NULL, ARGS("--version", "--", "true"));
	assert_int_equal(r.status, 0);
	assert_string_equal(r.err, "");
	xsnprintf(want, sizeof want, "gaiarun %s\n", GAIA_VERSION);
	assert_string_equal(r.out, want);
}

static void test_help_explains_every_option(void **state)
{
	static const char *const options[] = {
		"--readahead=SIZE", "--gpu-readahead=SIZE", "--paths=GLOBS",
		"--min-map=SIZE",   "--backing=MODE",       "--dirty-tracking=MODE",
		"--release-ms=MS",  "--log=LEVEL",          "--stats[=PATH]",
		"--disable",        "--lib=PATH",           "--dry-run",
		"--version",        "--help",
	};
	struct run r;

	run_gaiarun(&r, NULL, ARGS("--help"));
	assert_int_equal(r.status, 0);
	assert_string_equal(r.err, "");
	for (size_t i = 0; i < sizeof options / sizeof *options; i++) {
		char line_start[64];

		/* each option begins a line of the option list */
		xsnprintf(line_start, sizeof line_start, "\n  %s ", options[i]);
		if (strcmp(options[i], "--help") == 0)
			xsnprintf(line_start, sizeof line_start, "-h, --help ");
		assert_contains(r.out, line_start);
	}
	assert_contains(r.out, "GAIA_READAHEAD_KB");
	assert_contains(r.out, "auto|vmm|managed");
	assert_contains(r.out, "sets GAIA_MIN_MAP_KB:");
	assert_contains(r.out, "sets GAIA_DIRTY_TRACKING:");
	assert_contains(r.out, "sets GAIA_RELEASE_MS:");
}

/* --- finding libgaia.so --------------------------------------------------------- */

static void test_lib_option_beats_gaia_lib(void **state)
{
	struct run r;
	char env[PATH_MAX + 16];

	xsnprintf(env, sizeof env, "GAIA_LIB=%s", dummy_lib2);
	run_gaiarun(&r, ENV(env), ARGS("--lib", dummy_lib, "--dry-run", "--", "true"));
	assert_int_equal(r.status, 0);
	assert_var(r.out, "LD_PRELOAD", dummy_lib);

	run_gaiarun(&r, ENV(env), ARGS("--dry-run", "--", "true"));
	assert_int_equal(r.status, 0);
	assert_var(r.out, "LD_PRELOAD", dummy_lib2);
}

static void test_missing_explicit_lib_is_127_naming_it(void **state)
{
	struct run r;
	char missing[PATH_MAX + 16], env[PATH_MAX + 32];

	xsnprintf(missing, sizeof missing, "%s/nope.so", tmp_dir);
	run_gaiarun(&r, NULL, ARGS("--lib", missing, "--dry-run", "--", "true"));
	assert_int_equal(r.status, 127);
	assert_string_equal(r.out, "");
	assert_contains(r.err, missing);

	xsnprintf(env, sizeof env, "GAIA_LIB=%s", missing);
	run_gaiarun(&r, ENV(env), ARGS("--dry-run", "--", "true"));
	assert_int_equal(r.status, 127);
	assert_contains(r.err, missing);
	assert_contains(r.err, "GAIA_LIB");
}

static void test_relative_lib_becomes_absolute(void **state)
{
	struct run r;
	char rel[PATH_MAX + 8];

	xsnprintf(rel, sizeof rel, "%s/./dummy1.so", tmp_dir);
	run_gaiarun(&r, NULL, ARGS("--lib", rel, "--dry-run", "--", "true"));
	assert_int_equal(r.status, 0);
	assert_var(r.out, "LD_PRELOAD", dummy_lib);
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, mode);
	char buf[65536];
	ssize_t n;

	assert_true(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof buf)) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	assert_int_equal(n, 0);
	close(in);
	close(out);
}

/* A copy of gaiarun in <tree>/bin looks at <tree>/lib/libgaia.so.N (an
 * installed tree), then at <tree>/libgaia.so (a build tree), and names both
 * when neither exists. */
static void test_search_next_to_the_binary(void **state)
{
	char tree[PATH_MAX], bin[PATH_MAX + 8], exe[PATH_MAX + 16];
	char build_lib[PATH_MAX + 16], lib_dir[PATH_MAX + 8], inst_lib[PATH_MAX + 32];
	char inst_real[PATH_MAX + 64];
	char tried1[PATH_MAX + 32], tried2[PATH_MAX + 32];
	struct run r;

	xsnprintf(tree, sizeof tree, "%s/tree", tmp_dir);
	xsnprintf(bin, sizeof bin, "%s/bin", tree);
	xsnprintf(exe, sizeof exe, "%s/gaiarun", bin);
	xsnprintf(build_lib, sizeof build_lib, "%s/libgaia.so", tree);
	xsnprintf(lib_dir, sizeof lib_dir, "%s/lib", tree);
	xsnprintf(inst_lib, sizeof inst_lib, "%s/%s", lib_dir, GAIA_SONAME);
	xsnprintf(inst_real, sizeof inst_real, "%s/%s.0.0", lib_dir, GAIA_SONAME);
	assert_int_equal(mkdir(tree, 0755), 0);
	assert_int_equal(mkdir(bin, 0755), 0);
	assert_int_equal(mkdir(lib_dir, 0755), 0);
	copy_file(gaiarun, exe, 0755);

	run_exe(&r, exe, NULL, ARGS("--dry-run", "--", "true"));
	assert_int_equal(r.status, 127);
	assert_string_equal(r.out, "");
	xsnprintf(tried1, sizeof tried1, "%s/../lib/%s", bin, GAIA_SONAME);
	xsnprintf(tried2, sizeof tried2, "%s/../libgaia.so", bin);
	assert_contains(r.err, tried1);
	assert_contains(r.err, tried2);
	assert_true(strstr(r.err, tried1) < strstr(r.err, tried2));

	write_file(build_lib, "build tree\n", 0644);
	run_exe(&r, exe, NULL, ARGS("--dry-run", "--", "true"));
	assert_int_equal(r.status, 0);
	assert_var(r.out, "LD_PRELOAD", build_lib);

	/* the soname, not the file it links to */
	write_file(inst_real, "installed\n", 0644);
	assert_int_equal(symlink(GAIA_SONAME ".0.0", inst_lib), 0);
	run_exe(&r, exe, NULL, ARGS("--dry-run", "--", "true"));
	assert_int_equal(r.status, 0);
	assert_var(r.out, "LD_PRELOAD", inst_lib);

	/* GAIA_LIB comes before both */
	{
		char env[PATH_MAX + 16];

		xsnprintf(env, sizeof env, "GAIA_LIB=%s", dummy_lib2);
		run_exe(&r, exe, ENV(env), ARGS("--dry-run", "--", "true"));
		assert_int_equal(r.status, 0);
		assert_var(r.out, "LD_PRELOAD", dummy_lib2);
	}
}

/* --- running the program ------------------------------------------------------ */

static void test_unknown_program_is_127(void **state)
{
	struct run r;

	run_gaiarun(&r, NULL, ARGS("--lib", dummy_lib, "--", "/nonexistent/gaiarun-test-prog"));
	assert_int_equal(r.status, 127);
	assert_string_equal(r.err, "gaiarun: cannot run /nonexistent/gaiarun-test-prog: "
				   "No such file or directory\n");
}

static void test_unexecutable_program_is_126(void **state)
{
	struct run r;
	char prog[PATH_MAX + 16], want[PATH_MAX + 128];

	xsnprintf(prog, sizeof prog, "%s/not-executable", tmp_dir);
	write_file(prog, "#!/bin/sh\nexit 0\n", 0644);
	run_gaiarun(&r, NULL, ARGS("--lib", dummy_lib, "--", prog));
	assert_int_equal(r.status, 126);
	xsnprintf(want, sizeof want, "gaiarun: cannot run %s: %s\n", prog, strerror(EACCES));
	assert_string_equal(r.err, want);
}

/* The real library preloaded into /usr/bin/env: the variables and
 * LD_PRELOAD arrive, and the program's exit status is gaiarun's. */
static void test_exec_passes_the_environment(void **state)
{
	char lib[PATH_MAX + 16], *real, want[PATH_MAX + 16];
	struct run r;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	skip(); /* a sanitized libgaia.so cannot be preloaded into /usr/bin/env */
#endif
	xsnprintf(lib, sizeof lib, "%s/libgaia.so", build_dir);
	real = realpath(build_dir, NULL);
	if (!real || access(lib, R_OK) != 0 || access("/usr/bin/env", X_OK) != 0) {
		free(real);
		skip();
		return;
	}
	run_gaiarun(&r, ENV("LD_PRELOAD=", "GAIA_MIN_MAP_KB=128"),
		    ARGS("--lib", lib, "--readahead=1M", "--gpu-readahead=8M", "--log=error",
			 "--stats=/dev/null", "--", "/usr/bin/env"));
	if (r.status != 0)
		fail_msg("exit %d; stderr:\n%s", r.status, r.err);
	/* the name given, in its canonical directory */
	xsnprintf(want, sizeof want, "%s/libgaia.so", real);
	assert_var(r.out, "LD_PRELOAD", want);
	assert_var(r.out, "GAIA_READAHEAD_KB", "1024");
	assert_var(r.out, "GAIA_GPU_READAHEAD_KB", "8192");
	assert_var(r.out, "GAIA_LOG", "error");
	assert_var(r.out, "GAIA_STATS", "/dev/null");
	/* variables already set are inherited */
	assert_var(r.out, "GAIA_MIN_MAP_KB", "128");
	assert_no_var(r.out, "GAIA_DISABLE");
	free(real);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes_convert_to_kib),
		cmocka_unit_test(test_gpu_readahead_sets_its_own_knob),
		cmocka_unit_test(test_size_out_of_range_names_option_value_and_range),
		cmocka_unit_test(test_malformed_size_is_an_error),
		cmocka_unit_test(test_stats_without_path_is_stderr),
		cmocka_unit_test(test_stats_with_path_writes_there),
		cmocka_unit_test(test_words_flags_and_globs),
		cmocka_unit_test(test_every_knob_has_an_option),
		cmocka_unit_test(test_bad_integers_are_errors),
		cmocka_unit_test(test_bad_words_and_globs_are_errors),
		cmocka_unit_test(test_ld_preload_set_when_absent),
		cmocka_unit_test(test_ld_preload_prepends_keeping_entries),
		cmocka_unit_test(test_dry_run_prints_the_command_last),
		cmocka_unit_test(test_unknown_option_is_usage_error),
		cmocka_unit_test(test_missing_program_is_usage_error),
		cmocka_unit_test(test_program_starts_at_the_first_non_option),
		cmocka_unit_test(test_version_is_the_projects),
		cmocka_unit_test(test_help_explains_every_option),
		cmocka_unit_test(test_lib_option_beats_gaia_lib),
		cmocka_unit_test(test_missing_explicit_lib_is_127_naming_it),
		cmocka_unit_test(test_relative_lib_becomes_absolute),
		cmocka_unit_test(test_search_next_to_the_binary),
		cmocka_unit_test(test_unknown_program_is_127),
		cmocka_unit_test(test_unexecutable_program_is_126),
		cmocka_unit_test(test_exec_passes_the_environment),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

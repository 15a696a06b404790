/* Bad configuration, end to end (DESIGN §4): every GAIA_* variable set to
 * garbage, huge, negative, empty, overlong and random values in a real
 * process under the shim gives exactly one line on stderr naming the
 * variable, and the process behaves exactly as with the variable unset
 * (the default): same mapping managed or not, same data.
 *
 * The parent re-executes this program as a child once per (variable,
 * value), with the variable set, stderr captured; the child maps a file,
 * stores through the mapping, writes with pwrite, reads back with read()
 * and prints "managed=<0|1> data=<ok|BAD>". The baseline is the child with
 * the variable unset. Random values print their seed (ENV_FUZZ_SEED
 * replays); a random value the shim accepts is only checked for data. */
#include "itest.h"

#include <sys/mman.h>
#include <sys/wait.h>

#include <gaia_env.h>

#define PAGES 64
#define RANDOM_VALUES 3

enum knob_type { T_INT, T_ENUM, T_BOOL, T_STR };
static const struct {
	const char *name;
	enum knob_type type;
} knobs[] = {
#define K_INT_(NAME, ...) {"GAIA_" #NAME, T_INT},
#define K_ENUM_(NAME, ...) {"GAIA_" #NAME, T_ENUM},
#define K_BOOL_(NAME, ...) {"GAIA_" #NAME, T_BOOL},
#define K_STR_(NAME, ...) {"GAIA_" #NAME, T_STR},
	GAIA_ENV_TABLE(K_INT_, K_ENUM_, K_BOOL_, K_STR_)
#undef K_INT_
#undef K_ENUM_
#undef K_BOOL_
#undef K_STR_
};

static int child(const char *path)
{
	struct itest_gaia g = itest_gaia_lookup();
	int fd = open(path, O_RDWR);
	char *map = fd < 0 ? MAP_FAILED
			   : mmap(NULL, PAGES * ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	uint32_t v[PAGES];
	char buf[ITEST_PAGE], page[ITEST_PAGE];
	bool ok = true;

	if (map == MAP_FAILED) {
		perror("env_fuzz child: map");
		return ITEST_FAIL;
	}
	bool managed = g.mversion && g.mversion(map, PAGES * ITEST_PAGE, v) == 0 && v[0] != 0;
	memset(map + 3 * ITEST_PAGE, 'S', ITEST_PAGE);
	memset(page, 'W', sizeof(page));
	ok = pwrite(fd, page, sizeof(page), 9 * ITEST_PAGE) == (ssize_t)sizeof(page);
	ok = ok && msync(map, PAGES * ITEST_PAGE, MS_SYNC) == 0;
	ok = ok && pread(fd, buf, sizeof(buf), 3 * ITEST_PAGE) == (ssize_t)sizeof(buf) && buf[0] == 'S' &&
	     buf[ITEST_PAGE - 1] == 'S';
	ok = ok && map[9 * ITEST_PAGE] == 'W' && map[10 * ITEST_PAGE] == 0;
	printf("managed=%d data=%s\n", managed, ok ? "ok" : "BAD");
	return ok ? ITEST_PASS : ITEST_FAIL;
}

struct outcome {
	char out[256];
	char err[8192];
	int lines; /* of stderr */
	int status;
};

/* Reads up to size-1 bytes of the file at path into buf (NUL-ended). */
static size_t slurp(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	size_t n = 0;
	ssize_t r;

	while (fd >= 0 && n < size - 1 && (r = read(fd, buf + n, size - 1 - n)) > 0)
		n += (size_t)r;
	if (fd >= 0)
		close(fd);
	buf[n] = 0;
	return n;
}

static char capture_dir[PATH_MAX];

/* Runs the child with `name` set to `value` (unset when NULL); its stdout
 * and stderr go to files (a pipe could fill while the other is read). */
static int run_child(const char *self, const char *path, const char *name, const char *value, struct outcome *o)
{
	char out_path[PATH_MAX + 16], err_path[PATH_MAX + 16];
	pid_t pid;

	memset(o, 0, sizeof(*o));
	snprintf(out_path, sizeof(out_path), "%s/out", capture_dir);
	snprintf(err_path, sizeof(err_path), "%s/err", capture_dir);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (out < 0 || err < 0)
			_exit(127);
		dup2(out, 1);
		dup2(err, 2);
		if (value)
			setenv(name, value, 1);
		else
			unsetenv(name);
		execl(self, self, "child", path, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &o->status, 0) != pid)
		return -1;
	slurp(out_path, o->out, sizeof(o->out));
	size_t ne = slurp(err_path, o->err, sizeof(o->err));
	for (size_t i = 0; i < ne; i++)
		o->lines += o->err[i] == '\n';
	return 0;
}

static void random_value(unsigned short rng[3], char *v, size_t size)
{
	static const char alphabet[] = "0123456789-+ xyzAUTOauto:!*/.,\t\x01\xff";
	size_t len = 1 + itest_rnd(rng, (uint32_t)size - 2);

	for (size_t i = 0; i < len; i++)
		v[i] = alphabet[itest_rnd(rng, sizeof(alphabet) - 1)];
	v[len] = 0;
}

int main(int argc, char **argv)
{
	static const char *const fixed[] = {"garbage", "99999999999999999999999", "-5", "", " ", "-1",
					     "0x10", "1e3", "\x1b[31mred", "a::b", "\n"};
	static char overlong[20001];
	char dir[PATH_MAX], path[PATH_MAX + 16], value[64];
	unsigned short rng[3];
	struct outcome base, o;
	int failures = 0, runs = 0, rejected = 0;

	if (argc == 3 && !strcmp(argv[1], "child"))
		return child(argv[2]);
	if (!dlsym(RTLD_DEFAULT, "gaia_mversion")) {
		printf("env_fuzz: SKIP: not running under libgaia.so\n");
		return ITEST_SKIP;
	}
	uint64_t seed = itest_seed("ENV_FUZZ_SEED");
	itest_rng_seed(rng, seed);
	printf("env_fuzz: seed %" PRIu64 " (ENV_FUZZ_SEED replays)\n", seed);
	memset(overlong, '7', sizeof(overlong) - 1);
	if (itest_tempdir(dir, "env_fuzz") || itest_tempdir(capture_dir, "env_fuzz_out"))
		return ITEST_FAIL;
	snprintf(path, sizeof(path), "%s/data", dir);

	for (size_t k = 0; k < sizeof(knobs) / sizeof(knobs[0]); k++) {
		const char *name = knobs[k].name;
		char saved[512] = "";
		const char *cur = getenv(name);
		if (cur)
			snprintf(saved, sizeof(saved), "%s", cur);
		/* The baseline: this variable unset, the others as given. */
		unsetenv(name);
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || ftruncate(fd, PAGES * ITEST_PAGE))
			return ITEST_FAIL;
		close(fd);
		if (run_child(argv[0], path, name, NULL, &base) || !WIFEXITED(base.status) ||
		    WEXITSTATUS(base.status) != 0 || base.lines != 0) {
			printf("env_fuzz: FAIL: baseline for %s: status %d, stderr:\n%s\n", name, base.status,
			       base.err);
			return ITEST_FAIL;
		}
		for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]) + 1 + RANDOM_VALUES; i++) {
			const char *v;
			bool must_reject = true;
			if (i < sizeof(fixed) / sizeof(fixed[0])) {
				v = fixed[i];
				/* Strings accept most text; an empty one means the default. */
				if (knobs[k].type == T_STR)
					must_reject = (!strcmp(name, "GAIA_PATHS") && !strcmp(v, "a::b")) ||
						      !strcmp(v, "\n");
			} else if (i == sizeof(fixed) / sizeof(fixed[0])) {
				v = overlong;
			} else {
				random_value(rng, value, sizeof(value));
				v = value;
				must_reject = false;
			}
			if (knobs[k].type == T_STR && !must_reject && v != overlong)
				continue; /* a valid path or glob: not bad input */
			fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
			if (fd < 0 || ftruncate(fd, PAGES * ITEST_PAGE))
				return ITEST_FAIL;
			close(fd);
			runs++;
			if (run_child(argv[0], path, name, v, &o)) {
				printf("env_fuzz: FAIL: cannot run the child\n");
				return ITEST_FAIL;
			}
			char want[128];
			snprintf(want, sizeof(want), "gaia: %s=\"", name);
			bool one_line = o.lines == 1 && strncmp(o.err, want, strlen(want)) == 0;
			bool exited_ok = WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0;
			bool as_default = strcmp(o.out, base.out) == 0;
			bool good;
			if (one_line)
				rejected++;
			if (must_reject || v == overlong)
				good = exited_ok && one_line && as_default;
			else
				good = exited_ok && (o.lines == 0 || (one_line && as_default));
			if (!good) {
				failures++;
				printf("env_fuzz: FAIL: %s=\"%.60s\": exit %d, %d stderr lines, stdout \"%.60s\" "
				       "(default: \"%.60s\"), stderr:\n%.600s\n",
				       name, v, WIFEXITED(o.status) ? WEXITSTATUS(o.status) : -1, o.lines, o.out,
				       base.out, o.err);
			}
		}
		if (cur)
			setenv(name, saved, 1);
	}
	itest_remove_tree(dir);
	itest_remove_tree(capture_dir);
	printf("env_fuzz: %zu variables, %d runs, %d rejected with one line, %d failures\n",
	       sizeof(knobs) / sizeof(knobs[0]), runs, rejected, failures);
	return failures ? ITEST_FAIL : ITEST_PASS;
}

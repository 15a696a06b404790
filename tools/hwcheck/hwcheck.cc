/* gaia-hwcheck — the hardware checks a user-space program can run, as one
 * table: check id, what, expected, observed, verdict.
 *
 *   gaia-hwcheck [--markdown FILE] [--only ID,...] [--timeout SECONDS]
 *                [--cuobjdump PATH] [--sass OBJECT]... [--list]
 *
 * The checks come from research/gpu_ondemand.md §5 and
 * research/cuda_interpose.md §6; checks.cu says what each one expects.
 * This process reads the platform (E1), the kernels' machine code (S1) and
 * starts every GPU check group as a child of its own (hwcheck.h); it never
 * calls CUDA itself. Exit 0 unless the program itself broke: a check that
 * fails, or a child that dies, is a row of the table.
 */
#include <cxxabi.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "hwcheck.h"

extern char **environ;

#ifndef GAIA_HWCHECK_CUOBJDUMP
#define GAIA_HWCHECK_CUOBJDUMP ""
#endif
/* The nvcc-built objects of the workloads, relative to this program's
 * directory, ':'-separated. */
#ifndef GAIA_HWCHECK_SASS_OBJECTS
#define GAIA_HWCHECK_SASS_OBJECTS ""
#endif

struct row {
	std::string id, what, expected, observed, verdict;
	size_t order; /* index in hw_checks */
};

static std::vector<row> rows;
static std::vector<std::string> only;

static const struct hw_check *find_check(const std::string &id, size_t *index)
{
	for (size_t i = 0; hw_checks[i].id; i++)
		if (id == hw_checks[i].id) {
			*index = i;
			return &hw_checks[i];
		}
	return NULL;
}

static bool selected(const std::string &id)
{
	if (only.empty())
		return true;
	for (const std::string &o : only)
		if (id.compare(0, o.size(), o) == 0)
			return true;
	return false;
}

/* A row for check `id`; `what`, when given, replaces the table's. */
static void add_row(const std::string &id, const std::string &observed, const char *verdict,
		    const std::string &what = "")
{
	size_t i = 0;
	const struct hw_check *c = find_check(id, &i);
	if (!c) {
		fprintf(stderr, "gaia-hwcheck: internal: no check %s\n", id.c_str());
		exit(1);
	}
	rows.push_back(row{id, what.empty() ? c->what : what, c->expected, observed, verdict, i});
}

static std::string trim(const std::string &s)
{
	size_t a = s.find_first_not_of(" \t\r\n");
	if (a == std::string::npos)
		return "";
	size_t b = s.find_last_not_of(" \t\r\n");
	return s.substr(a, b - a + 1);
}

/* ---- E1: the platform, from files and commands ---- */

/* The command's standard output; *ok when it ran and exited 0. */
static std::string command_output(const std::string &cmd, bool *ok)
{
	std::string out;
	FILE *f = popen(cmd.c_str(), "r");
	if (!f) {
		*ok = false;
		return out;
	}
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		out.append(buf, n);
	int st = pclose(f);
	*ok = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	return out;
}

/* The first line of a file, or "" with *present false. */
static std::string file_line(const char *path, bool *present)
{
	FILE *f = fopen(path, "r");
	*present = f != NULL;
	if (!f)
		return "";
	char line[512] = "";
	if (!fgets(line, sizeof(line), f))
		line[0] = 0;
	fclose(f);
	return trim(line);
}

static const char *judge_present(bool present, bool matches)
{
	return !present ? V_NEEDS_GPU : matches ? V_OK : V_DIFFERS;
}

static void check_e1(void)
{
	bool ok;
	if (selected("E1.gpu") || selected("E1.addressing")) {
		std::string l = command_output("nvidia-smi -L 2>/dev/null", &ok);
		std::string first = trim(l.substr(0, l.find('\n')));
		ok = ok && !first.empty();
		if (selected("E1.gpu"))
			add_row("E1.gpu", ok ? first : "not present (no nvidia-smi, or it found no GPU)",
				judge_present(ok, true));
		if (selected("E1.addressing")) {
			std::string q = ok ? command_output("nvidia-smi -q 2>/dev/null", &ok) : "";
			std::string mode;
			size_t at = q.find("Addressing Mode");
			if (at != std::string::npos) {
				std::string l2 = q.substr(at, q.find('\n', at) - at);
				mode = trim(l2.substr(l2.find(':') == std::string::npos ? l2.size() : l2.find(':') + 1));
			}
			if (!ok)
				add_row("E1.addressing", "not present (no nvidia-smi)", V_NEEDS_GPU);
			else if (mode.empty())
				add_row("E1.addressing", "nvidia-smi -q has no Addressing Mode line", V_DIFFERS);
			else
				add_row("E1.addressing", mode, mode == "None" ? V_OK : V_DIFFERS);
		}
	}
	bool present;
	if (selected("E1.driver")) {
		std::string v = file_line("/proc/driver/nvidia/version", &present);
		add_row("E1.driver", present ? v : "not present", judge_present(present, v.find("Open Kernel Module") != std::string::npos));
	}
	if (selected("E1.hmm")) {
		std::string v = file_line("/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", &present);
		add_row("E1.hmm", present ? v : "not present (nvidia_uvm not loaded)", judge_present(present, v == "N"));
	}
	if (selected("E1.kernel")) {
		struct utsname u;
		uname(&u);
		unsigned a = 0, b = 0, c = 0;
		sscanf(u.release, "%u.%u.%u", &a, &b, &c);
		bool new_enough = a > 6 || (a == 6 && (b > 1 || (b == 1 && c >= 24)));
		add_row("E1.kernel", u.release, new_enough ? V_OK : V_DIFFERS);
	}
}

/* ---- S1: stores and atomics in the kernels' machine code ---- */

static bool executable(const std::string &p)
{
	return !p.empty() && access(p.c_str(), X_OK) == 0;
}

static std::string self_dir(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0)
		return ".";
	buf[n] = 0;
	std::string s = buf;
	return s.substr(0, s.rfind('/'));
}

static std::string find_cuobjdump(const std::string &given)
{
	if (!given.empty())
		return executable(given) ? given : "";
	if (executable(GAIA_HWCHECK_CUOBJDUMP))
		return GAIA_HWCHECK_CUOBJDUMP;
	const char *path = getenv("PATH");
	std::string dirs = std::string(path ? path : "") + ":/usr/local/cuda/bin";
	size_t at = 0;
	while (at <= dirs.size()) {
		size_t end = dirs.find(':', at);
		if (end == std::string::npos)
			end = dirs.size();
		std::string cand = dirs.substr(at, end - at) + "/cuobjdump";
		if (end > at && executable(cand))
			return cand;
		at = end + 1;
	}
	return "";
}

static std::string shell_quote(const std::string &s)
{
	std::string q = "'";
	for (char c : s)
		q += c == '\'' ? std::string("'\\''") : std::string(1, c);
	return q + "'";
}

static std::string demangled(const std::string &name)
{
	int st = 0;
	char *d = abi::__cxa_demangle(name.c_str(), NULL, NULL, &st);
	std::string out = st == 0 && d ? d : name;
	free(d);
	size_t paren = out.find('(');
	return paren == std::string::npos ? out : out.substr(0, paren);
}

struct sass_counts {
	unsigned stg = 0, atom = 0, red = 0, total = 0;
};

/* The opcode of a SASS line: an address in a comment, an optional
 * predicate, the opcode ("@!P0 STG.E desc[UR4][R2.64], R5 ;" after the
 * address gives "STG.E"); "" for any other line. */
static std::string sass_opcode(const std::string &line)
{
	std::string l = trim(line);
	if (l.compare(0, 2, "/*") != 0)
		return "";
	size_t close = l.find("*/");
	if (close == std::string::npos || close < 3 ||
	    l.find_first_not_of("0123456789abcdef", 2) != close)
		return "";
	std::string rest = trim(l.substr(close + 2));
	if (!rest.empty() && rest[0] == '@')
		rest = trim(rest.substr(std::min(rest.find(' '), rest.size())));
	size_t end = rest.find_first_of(" ;");
	return rest.substr(0, end);
}

static void count_opcode(sass_counts &c, const std::string &op)
{
	c.total++;
	if (op.compare(0, 3, "STG") == 0)
		c.stg++;
	else if (op.compare(0, 4, "ATOM") == 0 && op.compare(0, 5, "ATOMS") != 0)
		c.atom++; /* ATOM, ATOMG: global; ATOMS is shared memory */
	else if (op.compare(0, 3, "RED") == 0 && op.compare(0, 5, "REDUX") != 0)
		c.red++; /* RED, REDG; REDUX is a warp reduction */
}

static void check_s1(const std::string &cuobjdump_opt, std::vector<std::string> objects)
{
	if (!selected("S1"))
		return;
	std::string tool = find_cuobjdump(cuobjdump_opt);
	if (tool.empty()) {
		add_row("S1", "no cuobjdump (looked for " +
				      std::string(*GAIA_HWCHECK_CUOBJDUMP ? GAIA_HWCHECK_CUOBJDUMP ", " : "") +
				      "in PATH and /usr/local/cuda/bin)",
			V_NEEDS_TOOLS);
		return;
	}
	if (objects.empty()) {
		std::string list = GAIA_HWCHECK_SASS_OBJECTS, dir = self_dir();
		size_t at = 0;
		while (at < list.size()) {
			size_t end = list.find(':', at);
			if (end == std::string::npos)
				end = list.size();
			std::string o = list.substr(at, end - at);
			if (!o.empty())
				objects.push_back(o[0] == '/' ? o : dir + "/" + o);
			at = end + 1;
		}
	}
	if (objects.empty())
		add_row("S1", "no nvcc-built objects named (nvcc was not found when building)", V_NEEDS_TOOLS);
	for (const std::string &obj : objects) {
		std::string base = obj.substr(obj.rfind('/') + 1);
		struct stat st;
		if (stat(obj.c_str(), &st)) {
			add_row("S1", obj + ": not built", V_NEEDS_TOOLS, "cuobjdump -sass " + base);
			continue;
		}
		bool ok;
		std::string out = command_output(shell_quote(tool) + " -sass " + shell_quote(obj) + " 2>&1", &ok);
		if (!ok) {
			std::string last = trim(out);
			last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
			add_row("S1", "cuobjdump failed: " + last, V_DIFFERS, "cuobjdump -sass " + base);
			continue;
		}
		std::vector<std::pair<std::string, sass_counts>> kernels;
		size_t at = 0;
		while (at < out.size()) {
			size_t end = out.find('\n', at);
			if (end == std::string::npos)
				end = out.size();
			std::string line = out.substr(at, end - at), t = trim(line);
			at = end + 1;
			if (t.compare(0, 10, "Function :") == 0) {
				kernels.push_back({demangled(trim(t.substr(10))), sass_counts()});
				continue;
			}
			std::string op = sass_opcode(line);
			if (!op.empty() && !kernels.empty())
				count_opcode(kernels.back().second, op);
		}
		if (kernels.empty())
			add_row("S1", "no SASS in the object", V_DIFFERS, "cuobjdump -sass " + base);
		for (const auto &k : kernels) {
			char o[160];
			snprintf(o, sizeof(o), "STG %u, ATOM %u, RED %u (of %u instructions)", k.second.stg,
				 k.second.atom, k.second.red, k.second.total);
			add_row("S1", o, V_OK, base + ": " + k.first);
		}
	}
}

/* ---- the GPU groups, each in a child ---- */

static std::string describe_end(int status)
{
	char buf[96];
	if (WIFEXITED(status))
		snprintf(buf, sizeof(buf), "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, sizeof(buf), "was killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, sizeof(buf), "ended with wait status %#x", status);
	return buf;
}

static std::vector<std::string> split_tabs(const std::string &s)
{
	std::vector<std::string> v;
	size_t at = 0;
	for (;;) {
		size_t end = s.find('\t', at);
		v.push_back(s.substr(at, end == std::string::npos ? std::string::npos : end - at));
		if (end == std::string::npos)
			return v;
		at = end + 1;
	}
}

/* Runs one group in a child, `self --child=NAME`, for at most timeout_s;
 * adds a row for each of the group's checks. False if no child could be
 * started (the program is broken, not the check). */
static bool run_group(const struct hw_group &g, int timeout_s)
{
	std::vector<std::string> ids;
	{
		std::string s = g.ids;
		size_t at = 0;
		while (at < s.size()) {
			size_t end = s.find(' ', at);
			if (end == std::string::npos)
				end = s.size();
			if (selected(s.substr(at, end - at)))
				ids.push_back(s.substr(at, end - at));
			at = end + 1;
		}
	}
	if (ids.empty())
		return true;
	int fds[2];
	if (pipe2(fds, O_CLOEXEC)) {
		perror("gaia-hwcheck: pipe");
		return false;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
	std::string arg = std::string("--child=") + g.name;
	char *argv[] = {(char *)"gaia-hwcheck", &arg[0], NULL};
	pid_t pid;
	int err = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (err) {
		fprintf(stderr, "gaia-hwcheck: starting the %s checks: %s\n", g.name, strerror(err));
		close(fds[0]);
		return false;
	}
	std::string out;
	bool timed_out = false;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left_ms = (long)timeout_s * 1000 - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left_ms <= 0) {
			timed_out = true;
			kill(pid, SIGKILL);
			break;
		}
		struct pollfd p = {fds[0], POLLIN, 0};
		int n = poll(&p, 1, (int)std::min(left_ms, 1000L));
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		char buf[4096];
		ssize_t r = read(fds[0], buf, sizeof(buf));
		if (r <= 0)
			break;
		out.append(buf, (size_t)r);
	}
	close(fds[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;

	std::map<std::string, std::pair<std::string, std::string>> got;
	std::string last; /* the last line that was not a result */
	size_t at = 0;
	while (at < out.size()) {
		size_t end = out.find('\n', at);
		if (end == std::string::npos)
			end = out.size();
		std::string line = out.substr(at, end - at);
		at = end + 1;
		std::vector<std::string> f = split_tabs(line);
		if (f.size() == 4 && f[0] == "ROW")
			got[f[1]] = {f[2], f[3]};
		else if (!trim(line).empty())
			last = trim(line);
	}
	std::string ended = timed_out ? "was killed after " + std::to_string(timeout_s) + " s" : describe_end(status);
	if (last.size() > 200)
		last = last.substr(0, 200) + "...";
	for (const std::string &id : ids) {
		auto it = got.find(id);
		if (it != got.end())
			add_row(id, it->second.first, it->second.second.c_str());
		else
			add_row(id, "no answer: the check's process " + ended + (last.empty() ? "" : "; its last words: " + last),
				hw_simulated ? V_SIMULATED : V_DIFFERS);
	}
	return true;
}

/* ---- output ---- */

/* `text` cut into lines of at most `width` columns, at spaces where it can. */
static std::vector<std::string> wrap(const std::string &text, size_t width)
{
	std::vector<std::string> lines;
	std::string rest = text;
	while (rest.size() > width) {
		size_t cut = rest.rfind(' ', width);
		if (cut == std::string::npos || cut == 0)
			cut = width;
		lines.push_back(rest.substr(0, cut));
		rest = rest.substr(rest[cut] == ' ' ? cut + 1 : cut);
	}
	lines.push_back(rest);
	return lines;
}

static void print_table(FILE *f)
{
	static const size_t w[5] = {21, 36, 34, 42, 16};
	static const char *head[5] = {"check", "what", "expected", "observed", "verdict"};
	auto print_line = [&](const std::vector<std::string> cells) {
		std::vector<std::vector<std::string>> wrapped;
		size_t n = 1;
		for (size_t i = 0; i < 5; i++) {
			wrapped.push_back(wrap(cells[i], w[i]));
			n = std::max(n, wrapped.back().size());
		}
		for (size_t l = 0; l < n; l++) {
			std::string line;
			for (size_t i = 0; i < 5; i++) {
				std::string c = l < wrapped[i].size() ? wrapped[i][l] : "";
				line += c + std::string(w[i] - std::min(w[i], c.size()) + (i < 4 ? 2 : 0), ' ');
			}
			fprintf(f, "%s\n", trim(line).empty() ? "" : line.substr(0, line.find_last_not_of(' ') + 1).c_str());
		}
	};
	print_line({head[0], head[1], head[2], head[3], head[4]});
	std::string rule;
	for (size_t i = 0; i < 5; i++)
		rule += std::string(w[i], '-') + (i < 4 ? "  " : "");
	fprintf(f, "%s\n", rule.c_str());
	for (const row &r : rows)
		print_line({r.id, r.what, r.expected, r.observed, r.verdict});
}

static std::string md_cell(const std::string &s)
{
	std::string o;
	for (char c : s)
		o += c == '|' ? std::string("\\|") : std::string(1, c);
	return o;
}

static bool write_markdown(const char *path, const std::string &title)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "gaia-hwcheck: %s: %s\n", path, strerror(errno));
		return false;
	}
	fprintf(f, "# gaia-hwcheck\n\n%s\n\n", title.c_str());
	fprintf(f, "Expected: what the reference H200 host answered, and what research/gpu_ondemand.md §5 and\n"
		   "research/cuda_interpose.md §6 predicted (\"memo\"). Verdicts: `ok` (as expected), `differs`,\n"
		   "`simulated` (answered by the simulated GPU), `needs a GPU`, `needs nvcc tools`, `skipped`.\n\n");
	fprintf(f, "| check | what | expected | observed | verdict |\n|---|---|---|---|---|\n");
	for (const row &r : rows)
		fprintf(f, "| %s | %s | %s | %s | %s |\n", md_cell(r.id).c_str(), md_cell(r.what).c_str(),
			md_cell(r.expected).c_str(), md_cell(r.observed).c_str(), md_cell(r.verdict).c_str());
	if (fclose(f)) {
		fprintf(stderr, "gaia-hwcheck: %s: %s\n", path, strerror(errno));
		return false;
	}
	return true;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: gaia-hwcheck [--markdown FILE] [--only ID,...] [--timeout SECONDS]\n"
		   "                    [--cuobjdump PATH] [--sass OBJECT]... [--list]\n"
		   "Runs the hardware checks a user-space program can run and prints one table.\n"
		   "  --markdown FILE   also write the table as Markdown\n"
		   "  --only ID,...     only the checks whose ids begin with one of these (E1, H, Z5, V1, ...)\n"
		   "  --timeout S       seconds each group of GPU checks may take (default 120)\n"
		   "  --cuobjdump PATH  the cuobjdump to read SASS with (default: the toolkit's, or PATH)\n"
		   "  --sass OBJECT     an nvcc-built object for S1 (default: the workloads' kernels)\n"
		   "  --list            list the checks and exit\n");
}

int main(int argc, char **argv)
{
	const char *markdown = NULL;
	std::string cuobjdump;
	std::vector<std::string> objects;
	int timeout_s = 120;
	static const struct option opts[] = {
		{"markdown", required_argument, NULL, 'm'}, {"only", required_argument, NULL, 'o'},
		{"timeout", required_argument, NULL, 't'},  {"cuobjdump", required_argument, NULL, 'c'},
		{"sass", required_argument, NULL, 's'},     {"list", no_argument, NULL, 'l'},
		{"child", required_argument, NULL, 'C'},    {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			markdown = optarg;
			break;
		case 'o': {
			std::string s = optarg;
			size_t at = 0;
			while (at <= s.size()) {
				size_t end = std::min(s.find(',', at), s.size());
				if (end > at)
					only.push_back(s.substr(at, end - at));
				at = end + 1;
			}
			break;
		}
		case 't':
			timeout_s = atoi(optarg);
			if (timeout_s <= 0) {
				fprintf(stderr, "gaia-hwcheck: --timeout takes a positive number of seconds\n");
				return 2;
			}
			break;
		case 'c':
			cuobjdump = optarg;
			break;
		case 's':
			objects.push_back(optarg);
			break;
		case 'l':
			for (size_t i = 0; hw_checks[i].id; i++)
				printf("%-22s %s\n", hw_checks[i].id, hw_checks[i].what);
			return 0;
		case 'C':
			return hw_run_child(optarg);
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	struct utsname u;
	uname(&u);
	char date[64];
	time_t now = time(NULL);
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
	std::string title = std::string(hw_simulated ? "Simulated GPU (g++ build against build/simgpu)"
							  : "Real GPU (nvcc build)") +
			    ", " + date + ", " + u.nodename + ", Linux " + u.release + " " + u.machine + ".";
	printf("gaia-hwcheck: %s\n\n", title.c_str());

	check_e1();
	for (const struct hw_group *g = hw_groups; g->name; g++) {
		fprintf(stderr, "gaia-hwcheck: %s ...\n", g->name);
		if (!run_group(*g, timeout_s))
			return 1;
	}
	if (selected("X1"))
		add_row("X1",
			"not run: the UVM tools ioctls (UVM_TOOLS_INIT_EVENT_TRACKER_V2, the event queue) have "
			"driver-internal layouts (open-gpu-kernel-modules uvm_ioctl.h, uvm_tools.h) that change "
			"between driver versions; a wrong guess is undefined behaviour inside nvidia-uvm",
			hw_simulated ? V_NEEDS_GPU : V_SKIPPED);
	check_s1(cuobjdump, objects);

	std::stable_sort(rows.begin(), rows.end(), [](const row &a, const row &b) { return a.order < b.order; });
	print_table(stdout);
	if (markdown && !write_markdown(markdown, title))
		return 1;
	return 0;
}

#include "stats.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static uint64_t counters[GAIA_STAT_COUNT];

static const char *const stat_names[GAIA_STAT_COUNT] = {
#define GAIA_STAT_NAME(name, unit, doc) [GAIA_STAT_##name] = #name,
	GAIA_STATS_TABLE(GAIA_STAT_NAME)
#undef GAIA_STAT_NAME
};

static const char *const stat_units[GAIA_STAT_COUNT] = {
#define GAIA_STAT_UNIT(name, unit, doc) [GAIA_STAT_##name] = unit,
	GAIA_STATS_TABLE(GAIA_STAT_UNIT)
#undef GAIA_STAT_UNIT
};

static int stat_valid(enum gaia_stat s)
{
	return (unsigned)s < GAIA_STAT_COUNT;
}

void stats_add(enum gaia_stat s, uint64_t n)
{
	if (stat_valid(s))
		__atomic_fetch_add(&counters[s], n, __ATOMIC_RELAXED);
}

uint64_t stats_get(enum gaia_stat s)
{
	return stat_valid(s) ? __atomic_load_n(&counters[s], __ATOMIC_RELAXED) : 0;
}

const char *stats_name(enum gaia_stat s)
{
	return stat_valid(s) ? stat_names[s] : NULL;
}

const char *stats_unit(enum gaia_stat s)
{
	return stat_valid(s) ? stat_units[s] : NULL;
}

void stats_reset(void)
{
	for (int s = 0; s < GAIA_STAT_COUNT; s++)
		__atomic_store_n(&counters[s], 0, __ATOMIC_RELAXED);
}

/* The output buffer of stats_print: lives on the caller's stack, flushed
 * with write(2) when a line might not fit, so nothing allocates and no
 * stdio lock is taken (stats are printed from an atexit handler of a
 * preloaded library, where the program's stdio may be in any state). */
struct outbuf {
	int fd, err;
	size_t len;
	char data[1024];
};

static void outbuf_flush(struct outbuf *o)
{
	size_t done = 0;

	while (!o->err && done < o->len) {
		ssize_t n = write(o->fd, o->data + done, o->len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			o->err = n < 0 ? -errno : -EIO;
		else
			done += (size_t)n;
	}
	o->len = 0;
}

static void outbuf_puts(struct outbuf *o, const char *s)
{
	size_t n = strlen(s);

	while (n) {
		size_t room = sizeof(o->data) - o->len, chunk = n < room ? n : room;

		memcpy(o->data + o->len, s, chunk);
		o->len += chunk;
		s += chunk;
		n -= chunk;
		if (o->len == sizeof(o->data))
			outbuf_flush(o);
	}
}

static void outbuf_putu64(struct outbuf *o, uint64_t v)
{
	char digits[21];
	size_t i = sizeof(digits) - 1;

	digits[i] = '\0';
	do {
		digits[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	outbuf_puts(o, &digits[i]);
}

int stats_print(int fd)
{
	struct outbuf o = {.fd = fd};

	for (int s = 0; s < GAIA_STAT_COUNT; s++) {
		outbuf_puts(&o, "gaia: ");
		outbuf_puts(&o, stat_names[s]);
		outbuf_puts(&o, " ");
		outbuf_putu64(&o, stats_get((enum gaia_stat)s));
		outbuf_puts(&o, " ");
		outbuf_puts(&o, stat_units[s]);
		outbuf_puts(&o, "\n");
	}
	outbuf_flush(&o);
	return o.err;
}

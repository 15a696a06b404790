/* mtx.c — the Matrix Market coordinate reader (NIST's format: a banner
 * "%%MatrixMarket matrix coordinate <field> <symmetry>", comment lines
 * starting with '%', a size line "rows cols entries", then one entry per
 * line: "row col [value]"). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mtx.h"

enum field { FIELD_REAL, FIELD_INTEGER, FIELD_PATTERN };

struct reader {
    FILE *f;
    const char *path;
    char *line;
    size_t cap;
    uint64_t lineno;     /* of the line in `line` */
    uint64_t offset;     /* byte offset where that line starts */
    uint64_t next;       /* byte offset of the next line */
    char *err;
    size_t errlen;
};

/* Next line, without its newline; false at the end of the file. */
static bool next_line(struct reader *r)
{
    ssize_t n = getline(&r->line, &r->cap, r->f);
    if (n < 0)
        return false;
    r->lineno++;
    r->offset = r->next;
    r->next += (uint64_t)n;
    while (n > 0 && (r->line[n - 1] == '\n' || r->line[n - 1] == '\r'))
        r->line[--n] = 0;
    return true;
}

static bool blank(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return *s == 0;
}

__attribute__((format(printf, 2, 3))) static int fail_at(struct reader *r, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return graph_fail(r->err, r->errlen, -EINVAL, "%s: line %" PRIu64 " (offset %" PRIu64 "): %s", r->path,
                      r->lineno, r->offset, what);
}

static int parse_banner(struct reader *r, enum field *field, bool *symmetric)
{
    if (!next_line(r))
        return graph_fail(r->err, r->errlen, -EINVAL, "%s: offset 0: empty file, no Matrix Market banner", r->path);
    char object[32], format[32], fld[32], sym[32];
    if (strncmp(r->line, "%%MatrixMarket", 14) != 0 ||
        sscanf(r->line + 14, "%31s %31s %31s %31s", object, format, fld, sym) != 4)
        return fail_at(r, "not a Matrix Market banner (\"%%%%MatrixMarket matrix coordinate <field> <symmetry>\")");
    if (strcasecmp(object, "matrix") != 0)
        return fail_at(r, "object '%s': only 'matrix' is a graph", object);
    if (strcasecmp(format, "array") == 0)
        return fail_at(r, "'array' (dense) files are not graphs; only 'coordinate' is read");
    if (strcasecmp(format, "coordinate") != 0)
        return fail_at(r, "format '%s': only 'coordinate' is read", format);
    if (strcasecmp(fld, "real") == 0 || strcasecmp(fld, "double") == 0)
        *field = FIELD_REAL;
    else if (strcasecmp(fld, "integer") == 0)
        *field = FIELD_INTEGER;
    else if (strcasecmp(fld, "pattern") == 0)
        *field = FIELD_PATTERN;
    else
        return fail_at(r, "field '%s': only real, integer and pattern are edge weights", fld);
    if (strcasecmp(sym, "general") == 0)
        *symmetric = false;
    else if (strcasecmp(sym, "symmetric") == 0)
        *symmetric = true;
    else
        return fail_at(r, "symmetry '%s': only general and symmetric are graphs", sym);
    return 0;
}

/* Reads one unsigned integer field; advances *s. */
static bool read_u64(char **s, uint64_t *out)
{
    while (isspace((unsigned char)**s))
        (*s)++;
    if (!isdigit((unsigned char)**s))
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(*s, &end, 10);
    if (errno || (*end && !isspace((unsigned char)*end)))
        return false;
    *s = end;
    *out = v;
    return true;
}

static bool read_weight(char **s, uint32_t *out, bool *negative)
{
    while (isspace((unsigned char)**s))
        (*s)++;
    if (!**s)
        return false;
    errno = 0;
    char *end;
    double v = strtod(*s, &end);
    if (end == *s || errno == ERANGE || (*end && !isspace((unsigned char)*end)) || !isfinite(v))
        return false;
    *s = end;
    *negative = v < 0;
    if (v < 0 || v > 2147483648.0)
        return false;
    *out = (uint32_t)llround(v);
    return true;
}

int mtx_read(FILE *f, const char *path, struct csr_graph *g, char *err, size_t errlen)
{
    memset(g, 0, sizeof(*g));
    struct reader r = {.f = f, .path = path, .err = err, .errlen = errlen};
    enum field field = FIELD_PATTERN;
    bool symmetric = false;
    uint32_t *src = NULL, *dst = NULL, *w = NULL;
    int rc = parse_banner(&r, &field, &symmetric);
    if (rc)
        goto out;
    bool have_size = false;
    while (next_line(&r)) {
        if (r.line[0] == '%' || blank(r.line))
            continue;
        have_size = true;
        break;
    }
    if (!have_size) {
        rc = graph_fail(err, errlen, -EINVAL, "%s: offset %" PRIu64 ": truncated: no size line", path, r.next);
        goto out;
    }
    uint64_t rows, cols, entries;
    char *s = r.line;
    if (!read_u64(&s, &rows) || !read_u64(&s, &cols) || !read_u64(&s, &entries) || !blank(s)) {
        rc = fail_at(&r, "expected the size line \"rows cols entries\"");
        goto out;
    }
    if (rows != cols) {
        rc = fail_at(&r, "%" PRIu64 " x %" PRIu64 " is not square: not a graph's adjacency matrix", rows, cols);
        goto out;
    }
    if (rows > GRAPH_MAX_VERTICES) {
        rc = fail_at(&r, "%" PRIu64 " vertices: at most %llu supported", rows, GRAPH_MAX_VERTICES);
        goto out;
    }
    if (entries > (1ull << 40)) {
        rc = fail_at(&r, "%" PRIu64 " entries: implausible", entries);
        goto out;
    }
    uint64_t cap = symmetric ? 2 * entries : entries;
    src = malloc((cap ? cap : 1) * sizeof(uint32_t));
    dst = malloc((cap ? cap : 1) * sizeof(uint32_t));
    w = malloc((cap ? cap : 1) * sizeof(uint32_t));
    if (!src || !dst || !w) {
        rc = graph_fail(err, errlen, -ENOMEM, "%s: out of memory for %" PRIu64 " entries", path, entries);
        goto out;
    }
    uint64_t m = 0, seen = 0;
    uint32_t max_weight = 0;
    while (next_line(&r)) {
        if (r.line[0] == '%' || blank(r.line))
            continue;
        if (seen == entries) {
            rc = fail_at(&r, "more entries than the %" PRIu64 " the size line declares", entries);
            goto out;
        }
        uint64_t i, j;
        uint32_t weight = 1;
        bool negative = false;
        s = r.line;
        if (!read_u64(&s, &i) || !read_u64(&s, &j)) {
            rc = fail_at(&r, "entry %" PRIu64 ": expected \"row col%s\"", seen + 1,
                         field == FIELD_PATTERN ? "" : " value");
            goto out;
        }
        if (field != FIELD_PATTERN && !read_weight(&s, &weight, &negative)) {
            rc = negative ? fail_at(&r, "entry %" PRIu64 ": negative weight", seen + 1)
                          : fail_at(&r, "entry %" PRIu64 ": expected a value in [0, 2^31]", seen + 1);
            goto out;
        }
        if (!blank(s)) {
            rc = fail_at(&r, "entry %" PRIu64 ": unexpected text after the entry", seen + 1);
            goto out;
        }
        if (i < 1 || i > rows || j < 1 || j > cols) {
            rc = fail_at(&r, "entry %" PRIu64 ": (%" PRIu64 ", %" PRIu64 ") is outside 1..%" PRIu64 " (indices are 1-based)",
                         seen + 1, i, j, rows);
            goto out;
        }
        seen++;
        src[m] = (uint32_t)(i - 1);
        dst[m] = (uint32_t)(j - 1);
        w[m++] = weight;
        if (symmetric && i != j) {
            src[m] = (uint32_t)(j - 1);
            dst[m] = (uint32_t)(i - 1);
            w[m++] = weight;
        }
        if (weight > max_weight)
            max_weight = weight;
    }
    if (ferror(f)) {
        rc = graph_fail(err, errlen, -EIO, "%s: offset %" PRIu64 ": read error", path, r.next);
        goto out;
    }
    if (seen < entries) {
        rc = graph_fail(err, errlen, -EINVAL,
                        "%s: offset %" PRIu64 ": truncated: %" PRIu64 " of the %" PRIu64 " declared entries", path,
                        r.next, seen, entries);
        goto out;
    }
    rc = csr_from_coo(rows, m, src, dst, w, g, err, errlen);
    if (!rc) {
        g->symmetric = symmetric;
        g->max_weight = max_weight ? max_weight : 1;
    }
out:
    free(r.line);
    free(src);
    free(dst);
    free(w);
    return rc;
}

int mtx_read_path(const char *path, struct csr_graph *g, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return graph_fail(err, errlen, -errno, "%s: cannot open: %s", path, strerror(errno));
    int rc = mtx_read(f, path, g, err, errlen);
    fclose(f);
    return rc;
}

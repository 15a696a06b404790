/* The cross-process version table of a file, in POSIX shared memory
 * (DESIGN §3.3): one object per (device, inode), named for the user, the
 * device and the inode, created with the owner's permissions only, and
 * validated on every open (owner, mode, size, and the table's own header:
 * runtime/sharedtab.h). A table that fails any check is never used: the
 * process keeps private versions for that file and says so once.
 *
 * Lifetime: a process using a table holds a shared flock on it, which the
 * kernel drops when the process exits, execs or dies (the descriptor is
 * close-on-exec; a forked child shares its parent's). When a process stops
 * using a table (munmap of its last mapping of the file, or exit) it
 * removes the object if it can take the lock exclusively, i.e. nobody else
 * uses it. A process that takes the shared lock checks that the name still
 * names the object it opened, so nobody is left on a removed table while
 * others create a new one. A creator holds the shared lock before its table
 * appears under the name (create_new), so a table in place with no lock
 * held has no user. A table all of whose users ended without stopping
 * (_exit, abort, a crash, kill -9) is removed by the next process that
 * uses any table: it sweeps this user's gaia-v1-* objects once, removing
 * those it can lock exclusively.
 *
 * Identity: a table names (dev, ino), and an inode number is reused once
 * its file is gone; the header also holds the file's birth time (statx), or
 * its inode generation where the file system keeps no birth time. A table
 * in place whose header names another file (or an older layout) is
 * removed when unused and made anew; while in use it is not used here.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <linux/fs.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sharedtab.h"
#include "shim.h"

/* Pages a new table covers at least (1 GiB of file; shared memory is
 * sparse, so an untouched table costs nothing). */
#define MIN_CAPACITY_PAGES (1ull << 18)
#define OPEN_RETRIES 50

struct shared_file {
	struct shared_file *next;
	int refs;
	dev_t dev;
	ino_t ino;
	int fd;      /* the object, for flock */
	void *table;
	size_t size;
	char name[96];
};

static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shared_file *files;

static void table_name(char *buf, size_t size, dev_t dev, ino_t ino)
{
	snprintf(buf, size, "/gaia-v1-%u-%llx-%llx", (unsigned)geteuid(), (unsigned long long)dev,
		 (unsigned long long)ino);
}

/* Opens an existing table and checks everything about it before use: a
 * table that another user owns, that others may write, that is too small
 * or whose header does not describe this file is never used. *what names
 * the failed call or check. */
static int open_existing(const char *name, dev_t dev, ino_t ino, uint64_t birth, void **table,
			 size_t *size, int *fdp, const char **what)
{
	*what = "shm_open";
	int fd = shm_open(name, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
	if (fd < 0)
		return -errno;
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st))
		*what = "fstat", rc = -errno;
	else if (st.st_uid != geteuid())
		*what = "owner check (another user's table)", rc = -EPERM;
	else if (st.st_mode & 077)
		*what = "permission check (others may open it)", rc = -EACCES;
	else if ((size_t)st.st_size < sharedtab_bytes(1))
		*what = "size check (truncated)", rc = -EBADMSG;
	if (!rc) {
		*size = (size_t)st.st_size;
		*what = "mmap";
		*table = REAL(mmap)(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (*table == MAP_FAILED)
			rc = -errno;
		else if ((*what = "header check", rc = sharedtab_validate(*table, *size, dev, ino, birth,
									   (uint32_t)geteuid())))
			REAL(munmap)(*table, *size);
	}
	if (rc)
		close(fd);
	else
		*fdp = gaia_fd_keep(fd);
	return rc;
}

/* Removes "<name>.new-<pid>" objects of creators that died between
 * creating and publishing a table (see create_new). */
static void remove_abandoned(const char *name)
{
	char prefix[128];
	int len = snprintf(prefix, sizeof(prefix), "%s.new-", name + 1);
	DIR *d = opendir("/dev/shm");
	for (struct dirent *e; d && len > 0 && (e = readdir(d));) {
		if (strncmp(e->d_name, prefix, (size_t)len) != 0)
			continue;
		long pid = strtol(e->d_name + len, NULL, 10);
		if (pid > 0 && kill((pid_t)pid, 0) && errno == ESRCH) {
			char victim[300];
			snprintf(victim, sizeof(victim), "/%s", e->d_name);
			shm_unlink(victim);
		}
	}
	if (d)
		closedir(d);
}

/* Creates, formats and only then publishes a table: under a name of this
 * process's own, renamed into place without replacing (so a process
 * killed half-way never leaves an unformatted table where others would
 * find it and fall back to private versions for good). -EEXIST when
 * another process published one first. */
static int create_new(const char *name, dev_t dev, ino_t ino, uint64_t birth, uint64_t file_pages,
		      void **table, size_t *size, int *fdp, const char **what)
{
	char tmp[128], from[160], to[160];
	snprintf(tmp, sizeof(tmp), "%s.new-%d", name, (int)getpid());
	snprintf(from, sizeof(from), "/dev/shm%s", tmp);
	snprintf(to, sizeof(to), "/dev/shm%s", name);
	remove_abandoned(name);
	shm_unlink(tmp); /* ours from before an exec */
	*what = "shm_open (create)";
	int fd = shm_open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	uint64_t capacity = file_pages * 2 > MIN_CAPACITY_PAGES ? file_pages * 2 : MIN_CAPACITY_PAGES;
	*size = sharedtab_bytes(capacity);
	*table = MAP_FAILED;
	int rc = 0;
	if (fchmod(fd, 0600))
		*what = "fchmod", rc = -errno;
	else if (ftruncate(fd, (off_t)*size))
		*what = "ftruncate", rc = -errno;
	if (!rc) {
		*what = "mmap";
		*table = REAL(mmap)(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (*table == MAP_FAILED)
			rc = -errno;
		else if ((rc = sharedtab_format(*table, *size, dev, ino, birth, (uint32_t)geteuid(),
						capacity)))
			*what = "format";
		else if (flock(fd, LOCK_SH))
			*what = "flock", rc = -errno;
		else if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE))
			*what = "rename into /dev/shm", rc = -errno;
	}
	if (rc) {
		if (*table != MAP_FAILED)
			REAL(munmap)(*table, *size);
		close(fd);
		shm_unlink(tmp);
	} else {
		*fdp = gaia_fd_keep(fd);
	}
	return rc;
}

/* Whether `name` still names the object open as fd (not removed, and not
 * removed and created again). */
static bool name_still_ours(const char *name, int fd)
{
	struct stat mine, now;
	int again = shm_open(name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
	if (again < 0)
		return false;
	bool same = fstat(fd, &mine) == 0 && fstat(again, &now) == 0 && mine.st_ino == now.st_ino &&
		    mine.st_dev == now.st_dev;
	close(again);
	return same;
}

/* Starts using the table: a shared lock held as long as the descriptor is
 * open. -EAGAIN when the object was removed meanwhile (start over). */
static int attach(struct shared_file *f)
{
	if (flock(f->fd, LOCK_SH))
		return -errno;
	return name_still_ours(f->name, f->fd) ? 0 : -EAGAIN;
}

/* Whether the object open as fd is a table this shim made for (dev, ino):
 * a regular object of this user, closed to others, with the magic and a
 * header naming that file (any layout version). Anything else under one of
 * our names (planted, copied, garbage) is never removed. */
static bool shim_table_of(int fd, dev_t dev, ino_t ino)
{
	struct stat st;
	uint64_t header[SHAREDTAB_HEADER_BYTES / 8], hdev, hino;
	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	       !(st.st_mode & 077) &&
	       pread(fd, header, sizeof(header), 0) == (ssize_t)sizeof(header) &&
	       sharedtab_identity(header, sizeof(header), &hdev, &hino) == 0 &&
	       hdev == (uint64_t)dev && hino == (uint64_t)ino;
}

/* Removes the table of (dev, ino) under `name` when nobody holds it (after
 * this process stopped using it, or when it is stale), and with it what
 * creators killed before publishing left (a later creator would have
 * removed them; there may be none). True when removed. */
static bool remove_if_unused(const char *name, dev_t dev, ino_t ino)
{
	int fd = shm_open(name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
	if (fd < 0)
		return false;
	bool removed = false;
	if (shim_table_of(fd, dev, ino) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
	    name_still_ours(name, fd)) {
		removed = shm_unlink(name) == 0;
		remove_abandoned(name);
	}
	close(fd);
	return removed;
}

/* Once per process, at its first table: removes this user's tables that
 * nobody holds (their users all ended without stopping). */
static void sweep_unused(void)
{
	static bool swept;
	if (swept)
		return;
	swept = true;
	char prefix[64];
	int len = snprintf(prefix, sizeof(prefix), "gaia-v1-%u-", (unsigned)geteuid());
	DIR *d = opendir("/dev/shm");
	unsigned removed = 0;
	for (struct dirent *e; d && len > 0 && (e = readdir(d));) {
		unsigned long long dev, ino;
		char rest;
		if (strncmp(e->d_name, prefix, (size_t)len) != 0 ||
		    sscanf(e->d_name + len, "%llx-%llx%c", &dev, &ino, &rest) != 2)
			continue; /* not a table's name (a creator's .new-<pid> one) */
		char name[300];
		snprintf(name, sizeof(name), "/%s", e->d_name);
		removed += remove_if_unused(name, (dev_t)dev, (ino_t)ino);
	}
	if (d)
		closedir(d);
	if (removed)
		gaia_debug("removed %u version tables in /dev/shm left by processes that ended "
			   "without stopping", removed);
}

/* The file's identity beyond (dev, ino): its birth time, or else its inode
 * generation; 0 when the file system keeps neither (then (dev, ino) alone
 * names the table). */
static uint64_t file_birth(int fd)
{
	struct statx stx;
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_BTIME, &stx) == 0 &&
	    (stx.stx_mask & STATX_BTIME))
		return (uint64_t)stx.stx_btime.tv_sec * 1000000000ull + stx.stx_btime.tv_nsec + 1;
	unsigned int generation;
	if (ioctl(fd, FS_IOC_GETVERSION, &generation) == 0)
		return 1ull << 63 | generation;
	return 0;
}

struct shared_file *shared_file_get(int file_fd, dev_t dev, ino_t ino, uint64_t file_pages)
{
	static int failed_once;
	pthread_mutex_lock(&files_lock);
	for (struct shared_file *f = files; f; f = f->next) {
		if (f->dev == dev && f->ino == ino) {
			f->refs++;
			pthread_mutex_unlock(&files_lock);
			return f;
		}
	}
	struct shared_file *f = calloc(1, sizeof(*f));
	if (!f) {
		pthread_mutex_unlock(&files_lock);
		return NULL;
	}
	table_name(f->name, sizeof(f->name), dev, ino);
	sweep_unused();
	uint64_t birth = file_birth(file_fd);
	int rc = -ENOENT;
	const char *what = "shm_open";
	/* Another process may be creating it: it formats right after
	 * creating, so an unformatted table is retried for a moment. */
	for (int attempt = 0; attempt < OPEN_RETRIES; attempt++) {
		rc = open_existing(f->name, dev, ino, birth, &f->table, &f->size, &f->fd, &what);
		if ((rc == -ESTALE || rc == -EBADMSG) && remove_if_unused(f->name, dev, ino)) {
			/* ours for this (dev, ino) but unusable: of a file since
			 * gone (another birth), or of an older layout */
			gaia_debug("removed /dev/shm%s: it described an earlier file with this "
				   "inode number, or had an older layout", f->name);
			rc = -ENOENT;
		}
		if (rc == -ENOENT)
			rc = create_new(f->name, dev, ino, birth, file_pages, &f->table, &f->size,
					&f->fd, &what);
		if (!rc && (what = "flock", rc = attach(f))) {
			REAL(munmap)(f->table, f->size);
			gaia_fd_release(f->fd);
		}
		if (rc != -EEXIST && rc != -EBADMSG && rc != -EAGAIN)
			break;
		struct timespec pause = {0, 2 * 1000 * 1000};
		nanosleep(&pause, NULL);
	}
	if (rc) {
		gaia_log_once(&failed_once, GAIA_LOG_WARN,
			      "shared version table /dev/shm%s not used: %s: %s; versions of this "
			      "file (and of others with the same problem) stay private to this "
			      "process", f->name, what, strerror(-rc));
		free(f);
		pthread_mutex_unlock(&files_lock);
		return NULL;
	}
	f->dev = dev;
	f->ino = ino;
	f->refs = 1;
	f->next = files;
	files = f;
	pthread_mutex_unlock(&files_lock);
	gaia_debug("shared version table /dev/shm%s: %zu bytes", f->name, f->size);
	return f;
}

void shared_file_put(struct shared_file *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&files_lock);
	if (--f->refs == 0) {
		for (struct shared_file **pp = &files; *pp; pp = &(*pp)->next) {
			if (*pp == f) {
				*pp = f->next;
				break;
			}
		}
		REAL(munmap)(f->table, f->size);
		if (f->fd >= 0) {
			gaia_fd_release(f->fd);
			remove_if_unused(f->name, f->dev, f->ino);
		}
		free(f);
	}
	pthread_mutex_unlock(&files_lock);
}

uint32_t shared_file_publish(struct shared_file *f, uint64_t file_page)
{
	return f ? sharedtab_publish(f->table, file_page) : 0;
}

uint32_t shared_file_version(struct shared_file *f, uint64_t file_page)
{
	return f ? sharedtab_version(f->table, file_page) : 0;
}

int shared_file_changes(struct shared_file *f, struct sharedtab_cursor *cursor, uint64_t first,
			uint64_t n, void (*fn)(uint64_t page, uint32_t version, void *arg), void *arg)
{
	return f ? sharedtab_changes(f->table, cursor, first, n, fn, arg) : 0;
}

void shared_file_after_fork(void)
{
	/* The child shares its parent's descriptors, so its locks too. */
	pthread_mutex_init(&files_lock, NULL);
}

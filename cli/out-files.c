/*
 * out-files.c - the command's output files, written as one set (see
 * out-files.h): checked before any work, staged in temporaries beside
 * their targets, renamed into place together.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "out-files.h"

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
  return -1;
}

/* ---- Temporaries removed on a signal ----------------------------------- */

/* The signals that end a run early; their handler removes the staged
 * temporaries (unlink is async-signal-safe), then dies of the signal. */
static const int fatal_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
#define N_FATAL (int)(sizeof fatal_signals / sizeof fatal_signals[0])
static char *volatile pending[OUT_MAX];
static struct sigaction saved_actions[N_FATAL], saved_xfsz;
static int handlers_installed;

static void remove_pending_and_die(int sig) {
  for (int i = 0; i < OUT_MAX; i++)
    if (pending[i] != NULL)
      unlink(pending[i]);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void fatal_set(sigset_t *set) {
  sigemptyset(set);
  for (int i = 0; i < N_FATAL; i++)
    sigaddset(set, fatal_signals[i]);
}

static void install_handlers(void) {
  if (handlers_installed)
    return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = remove_pending_and_die;
  fatal_set(&sa.sa_mask);
  for (int i = 0; i < N_FATAL; i++) {
    sigaction(fatal_signals[i], NULL, &saved_actions[i]);
    /* A signal the caller ignores (nohup, a shell's background job) stays ignored. */
    if (saved_actions[i].sa_handler != SIG_IGN)
      sigaction(fatal_signals[i], &sa, NULL);
  }
  /* Past a file-size limit (ulimit -f), write fails with EFBIG instead of
     the signal ending the run with its temporaries in place. */
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ign, &saved_xfsz);
  handlers_installed = 1;
}

static void restore_handlers(void) {
  if (!handlers_installed)
    return;
  for (int i = 0; i < N_FATAL; i++)
    sigaction(fatal_signals[i], &saved_actions[i], NULL);
  sigaction(SIGXFSZ, &saved_xfsz, NULL);
  handlers_installed = 0;
}

/* Register (or with NULL, forget) slot i's temporary, signals held. */
static void set_pending(int i, char *path) {
  sigset_t set, old;
  fatal_set(&set);
  sigprocmask(SIG_BLOCK, &set, &old);
  pending[i] = path;
  sigprocmask(SIG_SETMASK, &old, NULL);
}

/* ---- Checks ------------------------------------------------------------ */

void out_init(struct out_set *s, int force) {
  memset(s, 0, sizeof *s);
  s->force = force;
}

int out_add(struct out_set *s, const char *opt, const char *path) {
  if (s->n >= OUT_MAX)
    abort(); /* a programming error of the command */
  s->f[s->n].opt = opt;
  s->f[s->n].path = path;
  return s->n++;
}

static int starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

static const char *kind_of(mode_t m) {
  return S_ISDIR(m) ? "a directory" : S_ISSOCK(m) ? "a socket" : S_ISBLK(m) ? "a block device"
       : S_ISCHR(m) ? "a character device" : S_ISFIFO(m) ? "a FIFO" : "a special file";
}

/* Resolve one output: its target, whether it exists and how it is written. */
static int resolve(struct out_file *f, int force, char *err, size_t n) {
  struct stat lst;
  if (f->path[0] == '\0')
    return fail(err, n, "%s is empty", f->opt);
  if (lstat(f->path, &lst) != 0) {
    if (errno != ENOENT)
      return fail(err, n, "%s: cannot write '%s': %s", f->opt, f->path, strerror(errno));
    /* A new file: its folder, resolved, plus its name. */
    char *copy = strdup(f->path);
    if (copy == NULL)
      return fail(err, n, "no memory");
    char *slash = strrchr(copy, '/');
    const char *base = slash ? slash + 1 : copy;
    const char *dir = slash ? (slash == copy ? "/" : copy) : ".";
    if (slash)
      *slash = '\0';
    char *real = realpath(dir, NULL);
    if (real == NULL) {
      int e = errno;
      free(copy);
      return fail(err, n, "%s: cannot write '%s': %s", f->opt, f->path, strerror(e));
    }
    size_t len = strlen(real) + strlen(base) + 2;
    f->target = malloc(len);
    if (f->target)
      snprintf(f->target, len, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base);
    free(real);
    free(copy);
    if (f->target == NULL)
      return fail(err, n, "no memory");
    f->exists = 0;
    return 0;
  }
  if (stat(f->path, &f->st) != 0) {
    if (errno == ENOENT)
      return fail(err, n, "%s: '%s' is a symbolic link to a missing file", f->opt, f->path);
    if (errno == ELOOP)
      return fail(err, n, "%s: '%s' is a symbolic link that leads back to itself (a loop)",
                  f->opt, f->path);
    return fail(err, n, "%s: cannot follow the symbolic link '%s': %s", f->opt, f->path,
                strerror(errno));
  }
  f->exists = 1;
  f->target = realpath(f->path, NULL);
  if (f->target == NULL)
    return fail(err, n, "%s: cannot write '%s': %s", f->opt, f->path, strerror(errno));
  mode_t m = f->st.st_mode;
  if (!S_ISREG(m) && !S_ISCHR(m) && !S_ISFIFO(m))
    return fail(err, n, "%s: '%s' is %s", f->opt, f->path, kind_of(m));
  /* Devices, FIFOs and the names of open descriptors are written through:
   * replacing them with a regular file would destroy them. */
  f->through = !S_ISREG(m) || starts_with(f->path, "/dev/") || starts_with(f->path, "/proc/");
  if (!f->through && !force && (access(f->target, W_OK) != 0 || (m & 0222) == 0))
    return fail(err, n, "%s: '%s' is read-only (mode %04o); --force replaces it", f->opt,
                f->path, (unsigned)(m & 07777));
  return 0;
}

int out_check(struct out_set *s, int n_inputs, const char *const *in_opts,
              const char *const *in_paths, char *err, size_t n) {
  for (int i = 0; i < s->n; i++)
    if (resolve(&s->f[i], s->force, err, n) != 0)
      return -1;
  for (int i = 0; i < s->n; i++) {
    struct out_file *a = &s->f[i];
    for (int j = i + 1; j < s->n; j++) {
      struct out_file *b = &s->f[j];
      int same = a->exists && b->exists
                     ? a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino
                     : strcmp(a->target, b->target) == 0;
      /* Discarding both outputs into one device (/dev/null) is harmless. */
      if (same && !(a->exists && S_ISCHR(a->st.st_mode)))
        return fail(err, n, "%s '%s' and %s '%s' name the same file", a->opt, a->path, b->opt,
                    b->path);
    }
    if (!a->exists)
      continue;
    for (int j = 0; j < n_inputs; j++) {
      struct stat in;
      if (in_paths[j] == NULL || stat(in_paths[j], &in) != 0)
        continue;
      if (in.st_dev == a->st.st_dev && in.st_ino == a->st.st_ino)
        return fail(err, n, "%s '%s' names the same file as %s '%s'", a->opt, a->path,
                    in_opts[j], in_paths[j]);
    }
  }
  return 0;
}

/* ---- Staging ----------------------------------------------------------- */

static int write_all(int fd, const void *p, size_t len) {
  const unsigned char *b = p;
  while (len > 0) {
    ssize_t w = write(fd, b, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    b += w;
    len -= (size_t)w;
  }
  return 0;
}

/* The folder of a target (targets are absolute paths). */
static char *folder_of(const char *target) {
  char *dir = strdup(target);
  if (dir) {
    char *slash = strrchr(dir, '/');
    if (slash == dir)
      slash[1] = '\0';
    else if (slash)
      *slash = '\0';
  }
  return dir;
}

int out_stage(struct out_set *s, int i, const void *head, size_t head_len, const void *data,
              size_t data_len, char *err, size_t n) {
  struct out_file *f = &s->f[i];
  if (f->through) {
    f->head = malloc(head_len ? head_len : 1);
    if (f->head == NULL)
      return fail(err, n, "no memory");
    memcpy(f->head, head, head_len);
    f->head_len = head_len;
    f->data = data;
    f->data_len = data_len;
    f->staged = 1;
    return 0;
  }
  char *dir = folder_of(f->target);
  size_t len = dir ? strlen(dir) + 16 : 0;
  char *tmp = dir ? malloc(len) : NULL;
  if (tmp == NULL) {
    free(dir);
    return fail(err, n, "no memory");
  }
  /* A short name of its own: the target's name may already be 255 bytes. */
  snprintf(tmp, len, "%s%s.m3idx-XXXXXX", dir, strcmp(dir, "/") ? "/" : "");
  free(dir);
  install_handlers();
  sigset_t set, old;
  fatal_set(&set);
  sigprocmask(SIG_BLOCK, &set, &old); /* no signal between creating and registering */
  int fd = mkstemp(tmp);
  int e = errno;
  if (fd >= 0)
    pending[i] = tmp;
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (fd < 0) {
    free(tmp);
    return fail(err, n, "%s: cannot write '%s': %s", f->opt, f->path, strerror(e));
  }
  f->tmp = tmp;
  /* The replaced file's mode and owner, or a new file's 0666 less the umask. */
  mode_t mode;
  if (f->exists) {
    mode = f->st.st_mode & 07777;
    if (fchown(fd, f->st.st_uid, f->st.st_gid) != 0) {
      /* Only root may give a file away; the caller's ownership then stays. */
    }
  } else {
    mode_t mask = umask(0);
    umask(mask);
    mode = 0666 & ~mask;
  }
  int ok = fchmod(fd, mode) == 0 && write_all(fd, head, head_len) == 0 &&
           (data_len == 0 || write_all(fd, data, data_len) == 0) && fsync(fd) == 0;
  e = errno;
  if (close(fd) != 0 && ok) {
    ok = 0;
    e = errno;
  }
  if (!ok) {
    set_pending(i, NULL);
    unlink(tmp);
    free(tmp);
    f->tmp = NULL;
    return fail(err, n, "%s: cannot write '%s': %s", f->opt, f->path, strerror(e ? e : EIO));
  }
  f->staged = 1;
  return 0;
}

/* ---- Commit ------------------------------------------------------------ */

static int write_through(struct out_file *f, char *err, size_t n) {
  /* Non-blocking open: a FIFO nobody reads is an error, not a hang. */
  int flags = O_WRONLY | O_NONBLOCK | O_CLOEXEC | (S_ISREG(f->st.st_mode) ? O_TRUNC : 0);
  int fd = open(f->path, flags);
  if (fd < 0)
    return fail(err, n, "%s: cannot write '%s': %s", f->opt, f->path,
                errno == ENXIO ? "no process reads the FIFO" : strerror(errno));
  int fl = fcntl(fd, F_GETFL);
  int ok = fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0 &&
           write_all(fd, f->head, f->head_len) == 0 &&
           (f->data_len == 0 || write_all(fd, f->data, f->data_len) == 0);
  int e = errno;
  if (close(fd) != 0 && ok) {
    ok = 0;
    e = errno;
  }
  return ok ? 0 : fail(err, n, "%s: cannot write '%s': %s", f->opt, f->path, strerror(e));
}

/* A hard link to an existing target, so a failed set can put it back. */
static char *keep_old(const struct out_file *f) {
  char *dir = folder_of(f->target);
  size_t len = dir ? strlen(dir) + 48 : 0;
  char *old = dir ? malloc(len) : NULL;
  for (int k = 0; old && k < 100; k++) {
    snprintf(old, len, "%s%s.m3idx-old-%ld-%d", dir, strcmp(dir, "/") ? "/" : "",
             (long)getpid(), k);
    if (link(f->target, old) == 0) {
      free(dir);
      return old;
    }
    if (errno != EEXIST)
      break;
  }
  free(dir);
  free(old);
  return NULL; /* no hard links here: this one cannot be put back */
}

int out_commit(struct out_set *s, char *err, size_t n) {
  for (int i = 0; i < s->n; i++)
    if (!s->f[i].staged)
      return fail(err, n, "%s was not written", s->f[i].opt);
  for (int i = 0; i < s->n; i++)
    if (s->f[i].through && write_through(&s->f[i], err, n) != 0)
      return -1;
  sigset_t set, old;
  fatal_set(&set);
  sigprocmask(SIG_BLOCK, &set, &old);
  int failed = -1;
  for (int i = 0; i < s->n && failed < 0; i++) {
    struct out_file *f = &s->f[i];
    if (f->through)
      continue;
    if (f->exists)
      f->old = keep_old(f);
    if (rename(f->tmp, f->target) != 0) {
      failed = i;
      fail(err, n, "%s: cannot write '%s': %s", f->opt, f->path, strerror(errno));
      break;
    }
    pending[i] = NULL;
    free(f->tmp);
    f->tmp = NULL;
  }
  for (int i = 0; i < s->n; i++) {
    struct out_file *f = &s->f[i];
    if (f->through || (failed >= 0 && i >= failed))
      continue;
    if (failed >= 0) { /* undo: the old file back, or no new one */
      if (f->old != NULL)
        rename(f->old, f->target);
      else if (!f->exists)
        unlink(f->target);
    } else if (f->old != NULL) {
      unlink(f->old);
    }
  }
  if (failed >= 0 && s->f[failed].old != NULL)
    unlink(s->f[failed].old);
  for (int i = 0; i < s->n; i++) {
    free(s->f[i].old);
    s->f[i].old = NULL;
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  return failed >= 0 ? -1 : 0;
}

void out_discard(struct out_set *s) {
  for (int i = 0; i < s->n; i++) {
    struct out_file *f = &s->f[i];
    if (f->tmp != NULL) {
      set_pending(i, NULL);
      unlink(f->tmp);
      free(f->tmp);
    }
    free(f->target);
    free(f->head);
    f->tmp = f->target = NULL;
    f->head = NULL;
  }
  int any = 0;
  for (int i = 0; i < OUT_MAX; i++)
    any |= pending[i] != NULL;
  if (!any)
    restore_handlers();
  s->n = 0;
}

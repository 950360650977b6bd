// Zero-copy TCP relay: one background thread runs an epoll loop that moves bytes between the two
// sockets of each registered pair with splice(2) through a pipe, so payload never enters user space.
//
// JS API (errors are thrown with error.code = errno name, like sockopt.c):
//   spliceInit(cb)              once per JS environment (main thread or worker); cb(id, aToB, bToA,
//                               errnoName | null) is called exactly once per pair when it ends.
//   spliceStart(fdA, fdB, id)   dup()s both fds and hands the pair to the engine thread. The engine
//                               never touches the caller's fds, only its dups, which it closes when
//                               the pair ends (before reporting).
//   spliceStop(id) -> boolean   aborts a pair; it then reports "ECANCELED" (unless it already ended).
//   spliceStats(id) -> [aToB, bToA] | null   live byte counters (bytes written to the destination).
//
// Per direction (A->B, B->A) the engine splices source -> pipe -> destination. Data left in the pipe
// (destination full) is drained before the source is read again, so EAGAIN is unambiguous: on the
// source it waits for EPOLLIN, on the destination for EPOLLOUT (edge-triggered). EOF on the source
// shuts down the destination's write side once the pipe is empty. The pair ends when both directions
// reached EOF and drained, on any error (ECONNRESET, EPIPE, ...), or on spliceStop.
//
// Pipes come from a pool and are held only while a direction has bytes in flight, so thousands of
// mostly idle pairs cost two dup'd fds each and no pipe (pipe pages count against the per-user
// fs.pipe-user-pages-soft limit, 64 MiB by default, beyond which new pipes shrink to 8 KiB).
//
// The engine thread and its state are per process, shared by every environment; the library is
// linked with -z nodelete (binding.gyp) because a worker's teardown would otherwise dlclose it under
// the running thread. A terminating environment aborts its pairs without reporting.
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <node_api.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

// Pipe size (F_SETPIPE_SZ; the default 64 KiB stays when refused). 256 KiB costs ~10% more CPU per
// byte than 1 MiB but a quarter of the per-user pipe budget (fs.pipe-user-pages-soft).
#define PIPE_SIZE (256 << 10)
#define PUMP_BUDGET (4u << 20)    // bytes one direction may move before yielding to other pairs
#define POOL_MAX 32               // idle pipes kept for reuse
#define BUCKETS 4096              // id hash table
#define SPLICE_FLAGS (SPLICE_F_MOVE | SPLICE_F_NONBLOCK)

// ---- state ----

// One per JS environment (main thread, each worker): its callback and its pairs' reports.
typedef struct envstate {
  napi_threadsafe_function tsfn;
  int refs;      // 1 until the tsfn is finalized + 1 per registered pair; guarded by mu
  int dead;      // the environment is being torn down: report nothing; guarded by mu
  int64_t active; // pairs started and not yet reported; main thread only
} envstate;

typedef struct pair pair;

typedef struct {
  pair* p;
  int idx; // 0: A, 1: B
} endpoint;

typedef struct {
  int pipe[2];        // borrowed from the pool while bytes are in flight, else -1
  size_t in_pipe;     // bytes read from the source, not yet written to the destination
  int eof;            // source returned EOF
  int done;           // EOF seen, pipe drained, destination shut down
  int queued;         // on the ready list (stopped early with budget exhausted)
  _Atomic uint64_t bytes;
} direction;

struct pair {
  int64_t id;
  envstate* env;
  int fd[2];          // dups of A and B, owned by the engine
  endpoint ends[2];
  direction dir[2];   // 0: A->B, 1: B->A
  int registered;     // both fds added to epoll
  int finished;
  int stopping;       // on the stop list (guarded by mu)
  pair* hnext;        // id hash chain (guarded by mu)
  pair* snext;        // stop list (guarded by mu)
  pair* next;         // add queue (guarded by mu) / graveyard (engine)
};

typedef struct {
  envstate* env;
  int64_t id;
  uint64_t a2b, b2a;
  int err;
} report;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int started;                 // guarded by mu
static int epfd = -1, wakefd = -1;
static pair* table[BUCKETS];        // guarded by mu
static pair* addq;                  // pairs waiting for the engine to register them; guarded by mu
static pair* stopq;                 // pairs to abort; guarded by mu
static const int wake_tag = 0;      // epoll data.ptr of the eventfd

// Engine-thread-only state.
static struct { int r, w; } pool[POOL_MAX];
static int pool_len;
static struct { pair* p; int d; }* ready;
static size_t ready_len, ready_cap;
static pair* graveyard;

static size_t bucket(envstate* env, int64_t id) {
  uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)env;
  return (size_t)(h >> 20) % BUCKETS;
}

static pair* lookup(envstate* env, int64_t id) { // mu held
  for (pair* p = table[bucket(env, id)]; p; p = p->hnext)
    if (p->env == env && p->id == id) return p;
  return NULL;
}

static void unlink_pair(pair* q) { // mu held
  for (pair** pp = &table[bucket(q->env, q->id)]; *pp; pp = &(*pp)->hnext)
    if (*pp == q) {
      *pp = q->hnext;
      return;
    }
}

static void env_unref(envstate* env) { // mu held
  if (--env->refs == 0) free(env);
}

static void request_stop(pair* p) { // mu held
  if (p->stopping) return;
  p->stopping = 1;
  p->snext = stopq;
  stopq = p;
}

static void wake(void) {
  uint64_t one = 1;
  ssize_t rc;
  do rc = write(wakefd, &one, sizeof one);
  while (rc < 0 && errno == EINTR);
}

// ---- engine thread ----

static int pipe_get(int out[2]) {
  if (pool_len > 0) {
    pool_len--;
    out[0] = pool[pool_len].r;
    out[1] = pool[pool_len].w;
    return 0;
  }
  if (pipe2(out, O_NONBLOCK | O_CLOEXEC) != 0) return errno;
  fcntl(out[1], F_SETPIPE_SZ, PIPE_SIZE); // EPERM over the per-user limits: keep the default size
  return 0;
}

// Only empty pipes go back; a pipe still holding bytes (aborted pair) is closed.
static void pipe_put(int p[2], int empty) {
  if (p[0] < 0) return;
  if (empty && pool_len < POOL_MAX) {
    pool[pool_len].r = p[0];
    pool[pool_len].w = p[1];
    pool_len++;
  } else {
    close(p[0]);
    close(p[1]);
  }
  p[0] = p[1] = -1;
}

static void ready_push(pair* p, int d) {
  if (p->dir[d].queued) return;
  if (ready_len == ready_cap) {
    size_t cap = ready_cap ? ready_cap * 2 : 64;
    void* n = realloc(ready, cap * sizeof *ready);
    if (!n) abort();
    ready = n;
    ready_cap = cap;
  }
  ready[ready_len].p = p;
  ready[ready_len].d = d;
  ready_len++;
  p->dir[d].queued = 1;
}

// Moves bytes for one direction until it would block. Returns 0 or an errno.
static int pump(pair* p, int d) {
  direction* x = &p->dir[d];
  if (x->done) return 0;
  int src = p->fd[d], dst = p->fd[1 - d];
  size_t moved = 0;
  int rc = 0;
  for (;;) {
    if (x->in_pipe > 0) {
      ssize_t n = splice(x->pipe[0], NULL, dst, NULL, x->in_pipe, SPLICE_FLAGS);
      if (n > 0) {
        x->in_pipe -= (size_t)n;
        atomic_fetch_add_explicit(&x->bytes, (uint64_t)n, memory_order_relaxed);
        moved += (size_t)n;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break; // destination full: wait for EPOLLOUT on it
      rc = n < 0 ? errno : EIO;
      break;
    }
    if (!x->eof) {
      if (moved >= PUMP_BUDGET) { // let other pairs run; resume from the ready list
        ready_push(p, d);
        break;
      }
      if (x->pipe[0] < 0 && (rc = pipe_get(x->pipe)) != 0) break;
      ssize_t n = splice(src, NULL, x->pipe[1], NULL, PIPE_SIZE, SPLICE_FLAGS);
      if (n > 0) {
        x->in_pipe = (size_t)n;
        continue;
      }
      if (n == 0) {
        x->eof = 1;
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break; // the pipe is empty, so the source is: wait for EPOLLIN on it
      rc = errno;
      break;
    }
    // EOF and drained: forward the half-close.
    if (shutdown(dst, SHUT_WR) != 0 && errno != ENOTCONN) rc = errno;
    else x->done = 1;
    break;
  }
  if (x->in_pipe == 0) pipe_put(x->pipe, 1);
  return rc;
}

// Ends a pair once: forgets its fds, then reports. The pair is freed after the current batch, since
// later events of the same epoll_wait batch may still point at it.
static void finish(pair* p, int err) {
  if (p->finished) return;
  p->finished = 1;
  for (int i = 0; i < 2; i++) {
    // Explicit DEL: Node still holds the same open file description, so close() alone would leave
    // the registration in place.
    if (p->registered) epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd[i], NULL);
    close(p->fd[i]);
    p->fd[i] = -1;
    pipe_put(p->dir[i].pipe, p->dir[i].in_pipe == 0);
  }
  if (p->dir[0].queued || p->dir[1].queued)
    for (size_t k = 0; k < ready_len; k++)
      if (ready[k].p == p) ready[k].p = NULL;
  report* r = malloc(sizeof *r);
  pthread_mutex_lock(&mu);
  unlink_pair(p);
  if (p->stopping) // maybe still on the shared list
    for (pair** pp = &stopq; *pp; pp = &(*pp)->snext)
      if (*pp == p) {
        *pp = p->snext;
        break;
      }
  if (r) {
    r->env = p->env;
    r->id = p->id;
    r->a2b = atomic_load_explicit(&p->dir[0].bytes, memory_order_relaxed);
    r->b2a = atomic_load_explicit(&p->dir[1].bytes, memory_order_relaxed);
    r->err = err;
    // Under mu, so an environment tearing down (which sets dead under mu) is never called into.
    if (p->env->dead || napi_call_threadsafe_function(p->env->tsfn, r, napi_tsfn_nonblocking) != napi_ok) free(r);
  }
  env_unref(p->env);
  pthread_mutex_unlock(&mu);
  p->env = NULL;
  p->next = graveyard;
  graveyard = p;
}

static void after_pump(pair* p) {
  if (!p->finished && p->dir[0].done && p->dir[1].done) finish(p, 0);
}

static void run_pump(pair* p, int d) {
  int err = pump(p, d);
  if (err) finish(p, err);
}

static void handle_wake(void) {
  uint64_t v;
  ssize_t rc;
  do rc = read(wakefd, &v, sizeof v);
  while (rc < 0 && errno == EINTR);

  // Adds and stops are taken together, so a stop never precedes its pair's registration.
  pthread_mutex_lock(&mu);
  pair* adds = addq;
  addq = NULL;
  pair* stops = stopq; // these keep stopping = 1, so spliceStop cannot relink them meanwhile
  stopq = NULL;
  pthread_mutex_unlock(&mu);
  while (adds) {
    pair* p = adds;
    adds = p->next;
    p->next = NULL;
    int err = 0;
    for (int i = 0; i < 2 && !err; i++) {
      struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = &p->ends[i]};
      if (epoll_ctl(epfd, EPOLL_CTL_ADD, p->fd[i], &ev) != 0) {
        err = errno;
        if (i == 1) epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd[0], NULL);
      }
    }
    if (err) finish(p, err);
    else p->registered = 1; // ADD reports current readiness, so bytes already queued are not missed
  }
  while (stops) { // pairs are freed only by this thread, at the end of the batch
    pair* p = stops;
    stops = p->snext;
    finish(p, ECANCELED);
  }
}

static void* engine(void* arg) {
  struct epoll_event evs[256];
  for (;;) {
    int n = epoll_wait(epfd, evs, 256, ready_len > 0 ? 0 : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      perror("skua splice engine: epoll_wait");
      abort();
    }
    for (int i = 0; i < n; i++) {
      if (evs[i].data.ptr == &wake_tag) {
        handle_wake();
        continue;
      }
      endpoint* e = evs[i].data.ptr;
      pair* p = e->p;
      if (p->finished) continue;
      uint32_t ev = evs[i].events;
      if (ev & (EPOLLERR | EPOLLHUP)) {
        // Read first: bytes queued before a reset are still delivered, the error follows them.
        run_pump(p, 0);
        if (!p->finished) run_pump(p, 1);
        // Not seen by a read because that direction waits for its destination to drain: fail now
        // rather than hold the other connection until an idle timeout.
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (!p->finished && (ev & EPOLLERR) && p->dir[e->idx].in_pipe > 0 &&
            getsockopt(p->fd[e->idx], SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr != 0)
          finish(p, soerr);
      } else {
        if (ev & (EPOLLIN | EPOLLRDHUP)) run_pump(p, e->idx);      // source readable
        if ((ev & EPOLLOUT) && !p->finished) run_pump(p, 1 - e->idx); // destination writable
      }
      after_pump(p);
    }
    // Directions that stopped with their budget spent (edge-triggered: no new event will come).
    size_t len = ready_len;
    for (size_t k = 0; k < len; k++) {
      pair* p = ready[k].p;
      if (!p) continue;
      int d = ready[k].d;
      ready[k].p = NULL;
      p->dir[d].queued = 0;
      if (p->finished) continue;
      run_pump(p, d);
      after_pump(p);
    }
    // Keep entries pushed during this pass.
    size_t keep = 0;
    for (size_t k = len; k < ready_len; k++)
      if (ready[k].p) ready[keep++] = ready[k];
    ready_len = keep;
    while (graveyard) {
      pair* p = graveyard;
      graveyard = p->next;
      free(p);
    }
  }
  return arg;
}

// mu held. Returns 0 or an errno.
static int start_engine(void) {
  if (started) return 0;
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return errno;
  int wf = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wf < 0) {
    int err = errno;
    close(ep);
    return err;
  }
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = (void*)&wake_tag};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, wf, &ev) != 0) {
    int err = errno;
    close(ep);
    close(wf);
    return err;
  }
  epfd = ep;
  wakefd = wf;
  // All signals blocked in the engine (SIGPIPE from splice to a reset socket in particular); they
  // go to Node's threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int err = pthread_create(&t, &attr, engine, NULL);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err) {
    close(ep);
    close(wf);
    epfd = wakefd = -1;
    return err;
  }
  pthread_setname_np(t, "skua-splice");
  started = 1;
  return 0;
}

// ---- JS side (main thread of each environment) ----

static napi_value throw_errno(napi_env env, const char* what, int err) {
  const char* name = strerrorname_np(err);
  char msg[160];
  snprintf(msg, sizeof msg, "%s: %s (%s)", what, name ? name : "EUNKNOWN", strerror(err));
  napi_throw_error(env, name ? name : "EUNKNOWN", msg);
  return NULL;
}

static envstate* get_env(napi_env env) {
  void* data = NULL;
  napi_get_instance_data(env, &data);
  return data;
}

static napi_value get_args(napi_env env, napi_callback_info info, size_t n, napi_value* argv) {
  size_t argc = n;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < n) {
    napi_throw_type_error(env, "EINVAL", "missing arguments");
    return NULL;
  }
  return argv[0];
}

static int arg_int64(napi_env env, napi_value v, int64_t* out) {
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_number || napi_get_value_int64(env, v, out) != napi_ok) {
    napi_throw_type_error(env, "EINVAL", "expected an integer argument");
    return 0;
  }
  return 1;
}

static void call_js(napi_env env, napi_value cb, void* context, void* data) {
  report* r = data;
  if (env == NULL || cb == NULL) { // the environment is going away
    free(r);
    return;
  }
  envstate* st = context;
  napi_value argv[4], undef;
  napi_create_int64(env, r->id, &argv[0]);
  napi_create_double(env, (double)r->a2b, &argv[1]);
  napi_create_double(env, (double)r->b2a, &argv[2]);
  const char* name = r->err ? strerrorname_np(r->err) : NULL;
  if (r->err) napi_create_string_utf8(env, name ? name : "EUNKNOWN", NAPI_AUTO_LENGTH, &argv[3]);
  else napi_get_null(env, &argv[3]);
  free(r);
  if (--st->active == 0) napi_unref_threadsafe_function(env, st->tsfn);
  napi_get_undefined(env, &undef);
  napi_call_function(env, undef, cb, 4, argv, NULL); // an exception surfaces as uncaught
}

// Environment teardown (before its tsfn's): abort its pairs without reporting.
static void env_cleanup(void* arg) {
  envstate* st = arg;
  pthread_mutex_lock(&mu);
  st->dead = 1;
  int any = 0;
  for (size_t b = 0; b < BUCKETS; b++)
    for (pair* p = table[b]; p; p = p->hnext)
      if (p->env == st) {
        request_stop(p);
        any = 1;
      }
  pthread_mutex_unlock(&mu);
  if (any) wake();
}

// The tsfn is gone: call_js will not run again, the engine must not call it.
static void tsfn_finalize(napi_env env, void* data, void* hint) {
  envstate* st = hint;
  pthread_mutex_lock(&mu);
  st->dead = 1;
  env_unref(st);
  pthread_mutex_unlock(&mu);
}

// spliceInit(callback)
static napi_value splice_init(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!get_args(env, info, 1, argv)) return NULL;
  if (get_env(env) != NULL) return throw_errno(env, "spliceInit", EALREADY);
  envstate* st = calloc(1, sizeof *st);
  if (!st) return throw_errno(env, "spliceInit", ENOMEM);
  napi_value name;
  napi_create_string_utf8(env, "skua.splice", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[0], NULL, name, 0, 1, NULL, tsfn_finalize, st, call_js, &st->tsfn) !=
      napi_ok) {
    free(st);
    return NULL; // a TypeError is pending when the callback is not a function
  }
  napi_unref_threadsafe_function(env, st->tsfn);
  st->refs = 1;
  napi_set_instance_data(env, st, NULL, NULL);
  // Registered after the tsfn, so it runs before the tsfn's own teardown (hooks run in reverse).
  napi_add_env_cleanup_hook(env, env_cleanup, st);
  return NULL;
}

// spliceStart(fdA, fdB, id)
static napi_value splice_start(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  int64_t fa, fb, id;
  if (!get_args(env, info, 3, argv) || !arg_int64(env, argv[0], &fa) || !arg_int64(env, argv[1], &fb) ||
      !arg_int64(env, argv[2], &id))
    return NULL;
  envstate* st = get_env(env);
  if (!st) return throw_errno(env, "spliceStart (spliceInit first)", EINVAL);
  if (fa < 0 || fb < 0 || fa > INT32_MAX || fb > INT32_MAX || fa == fb) return throw_errno(env, "spliceStart", EBADF);

  pair* p = calloc(1, sizeof *p);
  if (!p) return throw_errno(env, "spliceStart", ENOMEM);
  p->id = id;
  p->env = st;
  p->fd[0] = p->fd[1] = -1;
  for (int i = 0; i < 2; i++) {
    p->ends[i].p = p;
    p->ends[i].idx = i;
    p->dir[i].pipe[0] = p->dir[i].pipe[1] = -1;
  }
  int err = 0;
  const char* what = "spliceStart: dup";
  for (int i = 0; i < 2 && !err; i++) {
    int fd = (int)(i == 0 ? fa : fb);
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) err = errno;
    else if (type != SOCK_STREAM) err = ENOTSOCK;
    else if ((p->fd[i] = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) err = errno;
    else {
      // A dup shares the file status flags; Node's sockets are non-blocking already.
      int fl = fcntl(p->fd[i], F_GETFL);
      if (fl >= 0 && !(fl & O_NONBLOCK)) fcntl(p->fd[i], F_SETFL, fl | O_NONBLOCK);
    }
  }
  if (!err) {
    pthread_mutex_lock(&mu);
    what = "spliceStart";
    if (lookup(st, id)) err = EEXIST;
    else if ((err = start_engine()) != 0) what = "spliceStart: engine";
    if (!err) {
      size_t b = bucket(st, id);
      p->hnext = table[b];
      table[b] = p;
      p->next = addq;
      addq = p;
      st->refs++;
    }
    pthread_mutex_unlock(&mu);
  }
  if (err) {
    for (int i = 0; i < 2; i++)
      if (p->fd[i] >= 0) close(p->fd[i]);
    free(p);
    return throw_errno(env, what, err);
  }
  if (st->active++ == 0) napi_ref_threadsafe_function(env, st->tsfn);
  wake();
  return NULL;
}

// spliceStop(id) -> whether a live pair was found (it reports ECANCELED soon, unless already ending).
static napi_value splice_stop(napi_env env, napi_callback_info info) {
  napi_value argv[1], result;
  int64_t id;
  if (!get_args(env, info, 1, argv) || !arg_int64(env, argv[0], &id)) return NULL;
  envstate* st = get_env(env);
  pair* p = NULL;
  if (st) {
    pthread_mutex_lock(&mu);
    if ((p = lookup(st, id)) != NULL) request_stop(p);
    pthread_mutex_unlock(&mu);
    if (p) wake();
  }
  int found = p != NULL;
  napi_get_boolean(env, found, &result);
  return result;
}

// spliceStats(id) -> [aToB, bToA] | null once the pair has ended.
static napi_value splice_stats(napi_env env, napi_callback_info info) {
  napi_value argv[1], result;
  int64_t id;
  if (!get_args(env, info, 1, argv) || !arg_int64(env, argv[0], &id)) return NULL;
  envstate* st = get_env(env);
  uint64_t v[2];
  int found = 0;
  if (st) {
    pthread_mutex_lock(&mu);
    pair* p = lookup(st, id);
    if (p) {
      found = 1;
      v[0] = atomic_load_explicit(&p->dir[0].bytes, memory_order_relaxed);
      v[1] = atomic_load_explicit(&p->dir[1].bytes, memory_order_relaxed);
    }
    pthread_mutex_unlock(&mu);
  }
  if (!found) {
    napi_get_null(env, &result);
    return result;
  }
  napi_create_array_with_length(env, 2, &result);
  for (uint32_t i = 0; i < 2; i++) {
    napi_value n;
    napi_create_double(env, (double)v[i], &n);
    napi_set_element(env, result, i, n);
  }
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"spliceInit", NULL, splice_init, NULL, NULL, NULL, napi_enumerable, NULL},
    {"spliceStart", NULL, splice_start, NULL, NULL, NULL, napi_enumerable, NULL},
    {"spliceStop", NULL, splice_stop, NULL, NULL, NULL, napi_enumerable, NULL},
    {"spliceStats", NULL, splice_stats, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)

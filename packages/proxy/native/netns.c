// Network namespaces and unix SEQPACKET sockets with SCM_RIGHTS, for ztunnel's in-pod mode.
//  - bindInNetns / socketInNetns: create a socket inside another network namespace (setns on this
//    thread, socket(), setns back); the socket keeps that namespace for life. Options that must come
//    before bind/connect (SO_MARK, IP_TRANSPARENT, SO_REUSEADDR) are set here.
//  - seqpacket*: the ZDS transport (istio-cni <-> ztunnel): one protobuf message per packet, the pod's
//    netns fd as SCM_RIGHTS ancillary data. Blocking waits run on the libuv pool with a poll timeout so
//    the JS side can stop them.
// Errors are thrown (or passed to callbacks) with error.code = errno name ("EPERM").
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <node_api.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_FDS 4
#define MAX_ARGS 6

static napi_value make_error(napi_env env, const char* what, int err) {
  const char* name = strerrorname_np(err);
  char msg[200];
  snprintf(msg, sizeof msg, "%s: %s (%s)", what, name ? name : "EUNKNOWN", strerror(err));
  napi_value code, text, e;
  napi_create_string_utf8(env, name ? name : "EUNKNOWN", NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &text);
  napi_create_error(env, code, text, &e);
  return e;
}

static napi_value throw_errno(napi_env env, const char* what, int err) {
  napi_throw(env, make_error(env, what, err));
  return NULL;
}

static int get_args(napi_env env, napi_callback_info info, size_t want, napi_value* argv) {
  size_t argc = MAX_ARGS;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < want) {
    napi_throw_type_error(env, "EINVAL", "missing arguments");
    return 0;
  }
  return 1;
}

static int int_arg(napi_env env, napi_value v, int32_t* out) {
  if (napi_get_value_int32(env, v, out) != napi_ok) {
    napi_throw_type_error(env, "EINVAL", "expected an integer argument");
    return 0;
  }
  return 1;
}

static int str_arg(napi_env env, napi_value v, char* buf, size_t size) {
  size_t len;
  if (napi_get_value_string_utf8(env, v, buf, size, &len) != napi_ok || len >= size - 1) {
    napi_throw_type_error(env, "EINVAL", "expected a (short) string argument");
    return 0;
  }
  return 1;
}

// Runs socket() inside `ns_fd` (-1: the current namespace). setns is per thread: enter, create,
// return, all on this thread, before anything else can run on it.
static int socket_in(int ns_fd, int domain, int type, int* err) {
  int self = -1;
  if (ns_fd >= 0) {
    self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0) { *err = errno; return -1; }
    if (setns(ns_fd, CLONE_NEWNET) != 0) { *err = errno; close(self); return -1; }
  }
  int fd = socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int saved = errno;
  if (self >= 0) {
    if (setns(self, CLONE_NEWNET) != 0) abort();  // a thread stuck in a pod's namespace must not go on
    close(self);
  }
  if (fd < 0) *err = saved;
  return fd;
}

static int set_options(int fd, int domain, int32_t mark, int32_t transparent, int* err) {
  int one = 1;
  if (mark > 0) {
    uint32_t m = (uint32_t)mark;
    if (setsockopt(fd, SOL_SOCKET, SO_MARK, &m, sizeof m) != 0) { *err = errno; return 0; }
  }
  if (transparent) {
    int rc = domain == AF_INET6 ? setsockopt(fd, SOL_IPV6, IPV6_TRANSPARENT, &one, sizeof one)
                                : setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof one);
    if (rc != 0) { *err = errno; return 0; }
  }
  return 1;
}

// bindInNetns(nsFd, "tcp"|"udp", address, port, mark, transparent) -> fd, bound (and listening for TCP).
static napi_value bind_in_netns(napi_env env, napi_callback_info info) {
  napi_value argv[MAX_ARGS];
  int32_t ns_fd, port, mark, transparent;
  char kind[8], addr[INET6_ADDRSTRLEN];
  if (!get_args(env, info, 6, argv) || !int_arg(env, argv[0], &ns_fd) || !str_arg(env, argv[1], kind, sizeof kind) ||
      !str_arg(env, argv[2], addr, sizeof addr) || !int_arg(env, argv[3], &port) || !int_arg(env, argv[4], &mark) ||
      !int_arg(env, argv[5], &transparent)) return NULL;
  int tcp = strcmp(kind, "tcp") == 0;
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t slen;
  int domain;
  struct sockaddr_in* a4 = (struct sockaddr_in*)&ss;
  struct sockaddr_in6* a6 = (struct sockaddr_in6*)&ss;
  if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
    domain = AF_INET; a4->sin_family = AF_INET; a4->sin_port = htons((uint16_t)port); slen = sizeof *a4;
  } else if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
    domain = AF_INET6; a6->sin6_family = AF_INET6; a6->sin6_port = htons((uint16_t)port); slen = sizeof *a6;
  } else {
    return throw_errno(env, "bindInNetns: address", EINVAL);
  }
  int err = 0;
  int fd = socket_in(ns_fd, domain, tcp ? SOCK_STREAM : SOCK_DGRAM, &err);
  if (fd < 0) return throw_errno(env, "bindInNetns: socket", err);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (!set_options(fd, domain, mark, transparent, &err)) { close(fd); return throw_errno(env, "bindInNetns: setsockopt", err); }
  if (bind(fd, (struct sockaddr*)&ss, slen) != 0 || (tcp && listen(fd, 1024) != 0)) {
    err = errno;
    close(fd);
    return throw_errno(env, "bindInNetns: bind", err);
  }
  napi_value v;
  napi_create_int32(env, fd, &v);
  return v;
}

// socketInNetns(nsFd, family 4|6, mark, transparent) -> fd of an unconnected TCP socket in that namespace.
static napi_value socket_in_netns(napi_env env, napi_callback_info info) {
  napi_value argv[MAX_ARGS];
  int32_t ns_fd, family, mark, transparent;
  if (!get_args(env, info, 4, argv) || !int_arg(env, argv[0], &ns_fd) || !int_arg(env, argv[1], &family) ||
      !int_arg(env, argv[2], &mark) || !int_arg(env, argv[3], &transparent)) return NULL;
  int domain = family == 6 ? AF_INET6 : AF_INET;
  int err = 0;
  int fd = socket_in(ns_fd, domain, SOCK_STREAM, &err);
  if (fd < 0) return throw_errno(env, "socketInNetns", err);
  if (!set_options(fd, domain, mark, transparent, &err)) { close(fd); return throw_errno(env, "socketInNetns: setsockopt", err); }
  napi_value v;
  napi_create_int32(env, fd, &v);
  return v;
}

static int unix_addr(const char* path, struct sockaddr_un* sa) {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  if (strlen(path) >= sizeof sa->sun_path) return 0;
  strcpy(sa->sun_path, path);
  return 1;
}

// seqpacketListen(path) -> fd; seqpacketConnect(path) -> fd (blocking, then non-blocking).
static napi_value seqpacket_open(napi_env env, napi_callback_info info, int server) {
  napi_value argv[MAX_ARGS];
  char path[sizeof(((struct sockaddr_un*)0)->sun_path) + 1];
  if (!get_args(env, info, 1, argv) || !str_arg(env, argv[0], path, sizeof path)) return NULL;
  struct sockaddr_un sa;
  if (!unix_addr(path, &sa)) return throw_errno(env, "seqpacket: path", ENAMETOOLONG);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, "seqpacket: socket", errno);
  int rc = server ? bind(fd, (struct sockaddr*)&sa, sizeof sa) : connect(fd, (struct sockaddr*)&sa, sizeof sa);
  if (rc == 0 && server) rc = listen(fd, 16);
  if (rc != 0) { int err = errno; close(fd); return throw_errno(env, server ? "seqpacketListen" : "seqpacketConnect", err); }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  napi_value v;
  napi_create_int32(env, fd, &v);
  return v;
}
static napi_value seqpacket_listen(napi_env env, napi_callback_info info) { return seqpacket_open(env, info, 1); }
static napi_value seqpacket_connect(napi_env env, napi_callback_info info) { return seqpacket_open(env, info, 0); }

// seqpacketSend(fd, data: Buffer, fds: number[]) -> bytes sent (one packet; fds as SCM_RIGHTS).
static napi_value seqpacket_send(napi_env env, napi_callback_info info) {
  napi_value argv[MAX_ARGS];
  int32_t fd;
  if (!get_args(env, info, 3, argv) || !int_arg(env, argv[0], &fd)) return NULL;
  void* data;
  size_t len;
  if (napi_get_buffer_info(env, argv[1], &data, &len) != napi_ok) { napi_throw_type_error(env, "EINVAL", "expected a Buffer"); return NULL; }
  uint32_t nfds = 0;
  napi_get_array_length(env, argv[2], &nfds);
  if (nfds > MAX_FDS) return throw_errno(env, "seqpacketSend: too many fds", EINVAL);
  int fds[MAX_FDS];
  for (uint32_t i = 0; i < nfds; i++) {
    napi_value e;
    napi_get_element(env, argv[2], i, &e);
    if (!int_arg(env, e, &fds[i])) return NULL;
  }
  struct iovec iov = {data, len};
  char cbuf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
  memset(cbuf, 0, sizeof cbuf);
  struct msghdr msg = {0};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0) {
    msg.msg_control = cbuf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  ssize_t n;
  for (;;) {
    n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n >= 0 || errno != EAGAIN) break;
    struct pollfd p = {fd, POLLOUT, 0};
    poll(&p, 1, 1000);  // ZDS messages are tiny: a full buffer drains at once
  }
  if (n < 0) return throw_errno(env, "seqpacketSend", errno);
  napi_value v;
  napi_create_int32(env, (int32_t)n, &v);
  return v;
}

// ---- blocking waits on the libuv pool ----------------------------------------------------------

typedef struct {
  napi_async_work work;
  napi_ref callback;
  int fd, timeout_ms, accept, err, result, nfds, timed_out;
  size_t len;
  unsigned char buf[8192];
  int fds[MAX_FDS];
} wait_job;

static void wait_execute(napi_env env, void* data) {
  wait_job* j = (wait_job*)data;
  struct pollfd p = {j->fd, POLLIN, 0};
  int r = poll(&p, 1, j->timeout_ms);
  if (r == 0) { j->timed_out = 1; return; }
  if (r < 0) { j->err = errno; return; }
  if (j->accept) {
    j->result = accept4(j->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (j->result < 0) { if (errno == EAGAIN) j->timed_out = 1; else j->err = errno; }
    return;
  }
  struct iovec iov = {j->buf, sizeof j->buf};
  char cbuf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
  struct msghdr msg = {0};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n = recvmsg(j->fd, &msg, MSG_CMSG_CLOEXEC);
  if (n < 0) { if (errno == EAGAIN) j->timed_out = 1; else j->err = errno; return; }
  j->len = (size_t)n;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    int* in = (int*)CMSG_DATA(c);
    for (int i = 0; i < count; i++) {
      if (j->nfds < MAX_FDS) j->fds[j->nfds++] = in[i];
      else close(in[i]);
    }
  }
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) j->err = EMSGSIZE;
}

static void wait_complete(napi_env env, napi_status status, void* data) {
  wait_job* j = (wait_job*)data;
  napi_value cb, global, args[2], undef;
  napi_get_reference_value(env, j->callback, &cb);
  napi_get_global(env, &global);
  napi_get_undefined(env, &undef);
  napi_get_null(env, &args[0]);
  args[1] = undef;
  if (j->err) {
    args[0] = make_error(env, j->accept ? "seqpacketAccept" : "seqpacketRecv", j->err);
    for (int i = 0; i < j->nfds; i++) close(j->fds[i]);
  } else if (j->timed_out) {
    napi_get_null(env, &args[1]);
  } else if (j->accept) {
    napi_create_int32(env, j->result, &args[1]);
  } else {
    napi_value obj, buf, arr, v;
    napi_create_object(env, &obj);
    napi_create_buffer_copy(env, j->len, j->buf, NULL, &buf);
    napi_set_named_property(env, obj, "data", buf);
    napi_create_array_with_length(env, (size_t)j->nfds, &arr);
    for (int i = 0; i < j->nfds; i++) { napi_create_int32(env, j->fds[i], &v); napi_set_element(env, arr, (uint32_t)i, v); }
    napi_set_named_property(env, obj, "fds", arr);
    args[1] = obj;
  }
  napi_call_function(env, global, cb, 2, args, NULL);
  napi_delete_reference(env, j->callback);
  napi_delete_async_work(env, j->work);
  free(j);
}

// seqpacketWait(fd, accept 0|1, timeoutMs, cb(err, result)): result null on timeout; for accept a new
// fd; for recv {data: Buffer (empty at end of stream), fds: number[]}.
static napi_value seqpacket_wait(napi_env env, napi_callback_info info) {
  napi_value argv[MAX_ARGS];
  int32_t fd, accept, timeout;
  if (!get_args(env, info, 4, argv) || !int_arg(env, argv[0], &fd) || !int_arg(env, argv[1], &accept) ||
      !int_arg(env, argv[2], &timeout)) return NULL;
  wait_job* j = (wait_job*)calloc(1, sizeof *j);
  if (!j) return throw_errno(env, "seqpacketWait", ENOMEM);
  j->fd = fd;
  j->accept = accept;
  j->timeout_ms = timeout;
  napi_create_reference(env, argv[3], 1, &j->callback);
  napi_value name;
  napi_create_string_utf8(env, "seqpacketWait", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, wait_execute, wait_complete, j, &j->work);
  napi_queue_async_work(env, j->work);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"bindInNetns", NULL, bind_in_netns, NULL, NULL, NULL, napi_enumerable, NULL},
    {"socketInNetns", NULL, socket_in_netns, NULL, NULL, NULL, napi_enumerable, NULL},
    {"seqpacketListen", NULL, seqpacket_listen, NULL, NULL, NULL, napi_enumerable, NULL},
    {"seqpacketConnect", NULL, seqpacket_connect, NULL, NULL, NULL, napi_enumerable, NULL},
    {"seqpacketSend", NULL, seqpacket_send, NULL, NULL, NULL, napi_enumerable, NULL},
    {"seqpacketWait", NULL, seqpacket_wait, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)

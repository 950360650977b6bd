// Linux socket options Node lacks: SO_ORIGINAL_DST, SO_MARK, IP_TRANSPARENT.
// Every function takes a socket fd; errors are thrown with error.code = errno name ("EPERM").
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <node_api.h>
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/netfilter_ipv4.h>          // SO_ORIGINAL_DST
#include <linux/netfilter_ipv6/ip6_tables.h> // IP6T_SO_ORIGINAL_DST

static napi_value throw_errno(napi_env env, const char* what, int err) {
  const char* name = strerrorname_np(err);
  char msg[160];
  snprintf(msg, sizeof msg, "%s: %s (%s)", what, name ? name : "EUNKNOWN", strerror(err));
  napi_throw_error(env, name ? name : "EUNKNOWN", msg);
  return NULL;
}

// Reads argument i as int32; on failure a TypeError is pending and 0 is returned.
static int arg_int(napi_env env, napi_callback_info info, size_t i, int32_t* out) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (i >= argc || napi_get_value_int32(env, argv[i], out) != napi_ok) {
    napi_throw_type_error(env, "EINVAL", "expected an integer argument");
    return 0;
  }
  return 1;
}

static int socket_domain(int fd) {
  int domain = 0;
  socklen_t len = sizeof domain;
  return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 ? domain : -1;
}

// getOriginalDst(fd) -> { address, port, family } | null when the connection was not NAT'd.
static napi_value get_original_dst(napi_env env, napi_callback_info info) {
  int32_t fd;
  if (!arg_int(env, info, 0, &fd)) return NULL;
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  int rc;
  // IPv4 connections accepted on a dual-stack (::) listener are AF_INET6 sockets with a
  // v4-mapped local address; their conntrack entry is IPv4, so ask SOL_IP for those.
  struct sockaddr_in6 local;
  socklen_t llen = sizeof local;
  int v6 = getsockname(fd, (struct sockaddr*)&local, &llen) == 0 && local.sin6_family == AF_INET6 &&
           !IN6_IS_ADDR_V4MAPPED(&local.sin6_addr);
  if (v6) rc = getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &ss, &len);
  else rc = getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &len);
  if (rc != 0) {
    if (errno == ENOENT || errno == ENOPROTOOPT) {
      napi_value nul;
      napi_get_null(env, &nul);
      return nul;
    }
    return throw_errno(env, "getOriginalDst", errno);
  }
  char text[INET6_ADDRSTRLEN];
  int port;
  const char* family;
  if (ss.ss_family == AF_INET6) {
    struct sockaddr_in6* a = (struct sockaddr_in6*)&ss;
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
    family = "IPv6";
  } else {
    struct sockaddr_in* a = (struct sockaddr_in*)&ss;
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
    family = "IPv4";
  }
  napi_value obj, v;
  napi_create_object(env, &obj);
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, obj, "address", v);
  napi_create_int32(env, port, &v);
  napi_set_named_property(env, obj, "port", v);
  napi_create_string_utf8(env, family, NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, obj, "family", v);
  return obj;
}

// setMark(fd, mark): SO_MARK, needs CAP_NET_ADMIN; set it before connect() to affect routing.
static napi_value set_mark(napi_env env, napi_callback_info info) {
  int32_t fd, mark;
  if (!arg_int(env, info, 0, &fd) || !arg_int(env, info, 1, &mark)) return NULL;
  uint32_t m = (uint32_t)mark;
  if (setsockopt(fd, SOL_SOCKET, SO_MARK, &m, sizeof m) != 0) return throw_errno(env, "setMark", errno);
  return NULL;
}

// setTransparent(fd, on): IP_TRANSPARENT or IPV6_TRANSPARENT, by the socket's domain.
static napi_value set_transparent(napi_env env, napi_callback_info info) {
  int32_t fd, on;
  if (!arg_int(env, info, 0, &fd) || !arg_int(env, info, 1, &on)) return NULL;
  int domain = socket_domain(fd);
  if (domain < 0) return throw_errno(env, "setTransparent", errno);
  int val = on ? 1 : 0;
  int rc = domain == AF_INET6 ? setsockopt(fd, SOL_IPV6, IPV6_TRANSPARENT, &val, sizeof val)
                              : setsockopt(fd, SOL_IP, IP_TRANSPARENT, &val, sizeof val);
  if (rc != 0) return throw_errno(env, "setTransparent", errno);
  return NULL;
}

// createSocket(family 4|6) -> fd of a new non-blocking TCP socket, for options that must precede
// connect() (SO_MARK) or bind() (IP_TRANSPARENT); wrap it with new net.Socket({ fd }).
static napi_value create_socket(napi_env env, napi_callback_info info) {
  int32_t family;
  if (!arg_int(env, info, 0, &family)) return NULL;
  int fd = socket(family == 6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, "createSocket", errno);
  napi_value v;
  napi_create_int32(env, fd, &v);
  return v;
}

// mallocTrim() -> boolean: glibc's malloc_trim(0) hands the allocator's free pages back to the
// kernel (madvise on free pages inside each arena, not only the top). Buffers of a burst are freed
// in the middle of the heap, where plain free() cannot shrink it. Elsewhere than glibc: false.
static napi_value malloc_trim_fn(napi_env env, napi_callback_info info) {
  napi_value v;
#ifdef __GLIBC__
  napi_get_boolean(env, malloc_trim(0) == 1, &v);
#else
  napi_get_boolean(env, false, &v);
#endif
  return v;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"getOriginalDst", NULL, get_original_dst, NULL, NULL, NULL, napi_enumerable, NULL},
    {"setMark", NULL, set_mark, NULL, NULL, NULL, napi_enumerable, NULL},
    {"setTransparent", NULL, set_transparent, NULL, NULL, NULL, napi_enumerable, NULL},
    {"createSocket", NULL, create_socket, NULL, NULL, NULL, napi_enumerable, NULL},
    {"mallocTrim", NULL, malloc_trim_fn, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)

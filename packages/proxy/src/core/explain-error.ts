/**
 * One line for an error that stops a program at start-up: what failed and what to do, instead of a
 * stack trace. System errors (a port in use, a file that cannot be read) get their own advice; the
 * stack is for -l debug.
 */
interface SystemError extends Error {
  code?: string;
  syscall?: string;
  address?: string;
  port?: number;
  path?: string;
}

const where = (e: SystemError): string => (e.port !== undefined ? `${e.address ?? '0.0.0.0'}:${e.port}` : e.address ?? '');

function uid(): string {
  return process.getuid ? `uid ${process.getuid()}` : 'this user';
}

/** grpc-js reports a failed bind as text: "... errors: [listen EADDRINUSE: address already in use 127.0.0.1:15010]". */
function fromGrpcBind(message: string): SystemError | undefined {
  const m = /listen (E[A-Z]+): [^[\]]*?(\S+):(\d+)\]/.exec(message);
  if (!m) return undefined;
  const e: SystemError = new Error(message);
  e.code = m[1];
  e.syscall = 'listen';
  e.address = m[2];
  e.port = Number(m[3]);
  return e;
}

export function explainError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const e = (err as SystemError).code ? err as SystemError : fromGrpcBind(err.message) ?? err as SystemError;
  const listening = e.syscall === 'listen' || e.syscall === 'bind';
  switch (e.code) {
    case 'EADDRINUSE':
      return `cannot listen on ${where(e)}: the address is already in use; stop what holds it (ss -ltnp 'sport = :${e.port}') or choose another port`;
    case 'EACCES':
      if (listening) return `cannot listen on ${where(e)}: permission denied; ports below 1024 need root or CAP_NET_BIND_SERVICE, or choose a port above 1023`;
      if (e.path) return `cannot ${e.syscall ?? 'open'} ${e.path}: permission denied for ${uid()}; make it readable (chmod/chown) or run as its owner`;
      break;
    case 'EADDRNOTAVAIL':
      return `cannot listen on ${where(e)}: that address is not on any interface of this machine; use one of its addresses or 0.0.0.0`;
    case 'ENOENT':
      if (e.path) return `cannot ${e.syscall ?? 'open'} ${e.path}: no such file or directory; check the path`;
      break;
    case 'EISDIR':
      return `cannot read ${e.path ?? 'the file'}: it is a directory, a file was expected`;
    case 'ENOTDIR':
      if (e.path) return `cannot ${e.syscall ?? 'open'} ${e.path}: a part of the path is not a directory`;
      break;
    case 'EROFS':
      if (e.path) return `cannot write ${e.path}: read-only file system; point it at a writable directory`;
      break;
    case 'ENOSPC':
      return `${e.path ? `cannot write ${e.path}: ` : ''}no space left on the device`;
  }
  return e.message.split('\n')[0];
}

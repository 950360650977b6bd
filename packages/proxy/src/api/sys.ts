/**
 * @skua/proxy/sys — Linux socket operations Node lacks, from the native addons: original
 * destination, SO_MARK and IP_TRANSPARENT on new sockets, sockets and listeners inside other
 * network namespaces, unix SEQPACKET with file descriptors (SCM_RIGHTS), and glibc's malloc_trim.
 * Re-exports only.
 */
export {
  available as sockoptAvailable, createSocket, getOriginalDst, originalDestination, setMark, setTransparent, trimNativeHeap, type OriginalDst, type CreateSocketOptions,
} from '../sys/sockopt.ts';
export {
  netnsAvailable, listenInNetns, udpInNetns, socketInNetns, SeqpacketSocket, SeqpacketServer, type NetnsSocketOptions, type SeqpacketMessage,
} from '../sys/netns.ts';

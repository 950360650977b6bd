#!/usr/bin/python3
"""A real HTTP/2 peer for the HBONE tests (python3-h2 over OpenSSL, mutual TLS 1.3, ALPN h2).

  h2peer.py client HOST PORT CERT KEY CA AUTHORITY PAYLOAD_BYTES
      Connects without SNI, opens CONNECT AUTHORITY, sends PAYLOAD_BYTES and END_STREAM, reads the
      echo until the server ends the stream. Prints one JSON line: the server's SETTINGS, its
      connection-level WINDOW_UPDATE increments, the CONNECT status and the bytes echoed.
  h2peer.py server CERT KEY CA
      Listens on 127.0.0.1:0 (prints {"port": N} first), requires a client certificate, answers each
      CONNECT with 200 and echoes its bytes; when the first connection closes, prints one JSON line:
      the client's SETTINGS, its connection WINDOW_UPDATE increments, the SNI seen, the authorities,
      the most streams open at once, and the bytes echoed.
"""
import json
import socket
import ssl
import sys

import h2.config
import h2.connection
import h2.events
import h2.settings

S = h2.settings.SettingCodes


def settings_dict(changed):
    out = {}
    for code, change in changed.items():
        try:
            name = S(code).name
        except ValueError:
            name = str(code)
        out[name] = change.new_value
    return out


def note_connection_event(ev, result):
    """Records the peer's SETTINGS and connection-level WINDOW_UPDATEs; True when `ev` was one."""
    if isinstance(ev, h2.events.RemoteSettingsChanged):
        result['settings'].update(settings_dict(ev.changed_settings))
        return True
    if isinstance(ev, h2.events.WindowUpdated) and ev.stream_id == 0:
        result['connection_window_updates'].append(ev.delta)
        return True
    return False


def client_exchange(result, host, port, cert, key, ca, authority, payload_bytes):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False  # HBONE dials by IP; the identity is checked by SAN, not name
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(['h2'])
    raw = socket.create_connection((host, int(port)), timeout=20)
    tls = ctx.wrap_socket(raw, server_hostname=None)
    # python3-h2 4.1 wants :path even on CONNECT (RFC 9113 8.5 omits it): skip its header checks.
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, validate_outbound_headers=False, validate_inbound_headers=False))
    conn.initiate_connection()
    tls.sendall(conn.data_to_send())
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(':method', 'CONNECT'), (':authority', authority)])
    tls.sendall(conn.data_to_send())
    result['alpn'] = tls.selected_alpn_protocol()
    result['tls'] = tls.version()
    payload = b'x' * int(payload_bytes)
    sent = False
    done = False
    while not done:
        data = tls.recv(65536)
        if not data:
            break
        for ev in conn.receive_data(data):
            if note_connection_event(ev, result):
                continue
            if isinstance(ev, h2.events.ResponseReceived):
                result['status'] = int(dict(ev.headers)[b':status'])
            elif isinstance(ev, h2.events.DataReceived):
                result['echoed'] += len(ev.data)
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                done = True
        if result['status'] == 200 and not sent:
            sent = True
            offset = 0
            while offset < len(payload):
                window = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                if window <= 0:
                    break
                chunk = payload[offset:offset + window]
                conn.send_data(sid, chunk)
                offset += len(chunk)
            payload = payload[offset:]
            if not payload:
                conn.end_stream(sid)
            else:
                sent = False  # wait for a WINDOW_UPDATE, then send the rest
        tls.sendall(conn.data_to_send())


def client(*args):
    """Runs the exchange; a refused handshake or a reset still prints what was seen, with the error."""
    result = {'settings': {}, 'connection_window_updates': [], 'status': None, 'echoed': 0}
    try:
        client_exchange(result, *args)
    except (ssl.SSLError, ConnectionError, OSError) as err:
        result['error'] = type(err).__name__
    print(json.dumps(result), flush=True)


def server(cert, key, ca):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.set_alpn_protocols(['h2'])
    seen = {'sni': 'unset'}

    def on_sni(_sock, name, _ctx):
        seen['sni'] = name

    ctx.sni_callback = on_sni
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(8)
    print(json.dumps({'port': listener.getsockname()[1]}), flush=True)
    raw, _ = listener.accept()
    raw.settimeout(30)
    try:
        tls = ctx.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, ConnectionError, OSError) as err:
        print(json.dumps({'handshake_failed': type(err).__name__, 'sni': seen['sni'], 'methods': []}), flush=True)
        return
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, validate_inbound_headers=False))
    conn.initiate_connection()
    tls.sendall(conn.data_to_send())
    result = {'sni': seen['sni'], 'alpn': tls.selected_alpn_protocol(), 'settings': {}, 'connection_window_updates': [],
              'authorities': [], 'methods': [], 'max_open_streams': 0, 'echoed': 0}
    open_streams = set()
    while True:
        try:
            data = tls.recv(65536)
        except (ConnectionError, ssl.SSLError, socket.timeout):
            break
        if not data:
            break
        for ev in conn.receive_data(data):
            if note_connection_event(ev, result):
                continue
            if isinstance(ev, h2.events.RequestReceived):
                h = dict(ev.headers)
                result['methods'].append(h[b':method'].decode())
                result['authorities'].append(h[b':authority'].decode())
                conn.send_headers(ev.stream_id, [(':status', '200')])
                open_streams.add(ev.stream_id)
                result['max_open_streams'] = max(result['max_open_streams'], len(open_streams))
            elif isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if ev.stream_id in open_streams:
                    conn.send_data(ev.stream_id, ev.data)
                    result['echoed'] += len(ev.data)
            elif isinstance(ev, h2.events.StreamEnded):
                if ev.stream_id in open_streams:
                    conn.end_stream(ev.stream_id)
                    open_streams.discard(ev.stream_id)
            elif isinstance(ev, h2.events.StreamReset):
                open_streams.discard(ev.stream_id)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                pass
        out = conn.data_to_send()
        if out:
            tls.sendall(out)
    print(json.dumps(result), flush=True)


if __name__ == '__main__':
    if sys.argv[1] == 'client':
        client(*sys.argv[2:9])
    else:
        server(*sys.argv[2:5])

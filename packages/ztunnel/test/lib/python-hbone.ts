/**
 * An independent HBONE client for interop tests: python3-h2 over TLS 1.3 with a client
 * certificate, ALPN h2 and no SNI; sends CONNECT <authority>, prints the status, then (on 200)
 * sends `payload` bytes, half-closes and prints how many bytes came back and whether they start
 * with the server's greeting.
 */
export const PYTHON_HBONE_CLIENT = `
import socket, ssl, sys
import h2.connection, h2.config, h2.events
host, port, authority, cert, key, ca, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.check_hostname = False
ctx.load_verify_locations(ca)
ctx.load_cert_chain(cert, key)
ctx.set_alpn_protocols(["h2"])
tls = ctx.wrap_socket(socket.create_connection((host, port), 5))
assert tls.selected_alpn_protocol() == "h2", tls.selected_alpn_protocol()
conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, validate_outbound_headers=False, validate_inbound_headers=False))
conn.initiate_connection()
sid = conn.get_next_available_stream_id()
conn.send_headers(sid, [(b":method", b"CONNECT"), (b":authority", authority.encode())])
tls.sendall(conn.data_to_send())
status, got, done, sent = None, b"", False, False
data = bytes((i * 7) % 251 for i in range(n))
tls.settimeout(10)
while not done:
    chunk = tls.recv(65536)
    if not chunk: break
    for ev in conn.receive_data(chunk):
        if isinstance(ev, h2.events.ResponseReceived):
            status = dict(ev.headers)[b":status"].decode()
            if status != "200": done = True
        elif isinstance(ev, h2.events.DataReceived):
            got += ev.data
            conn.acknowledge_received_data(len(ev.data), sid)
        elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
            done = True
    if status == "200" and not sent:
        off = 0
        while off < len(data):
            size = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, len(data) - off)
            if size <= 0:
                tls.sendall(conn.data_to_send())
                for ev in conn.receive_data(tls.recv(65536)):
                    if isinstance(ev, h2.events.DataReceived):
                        got += ev.data
                        conn.acknowledge_received_data(len(ev.data), sid)
                continue
            conn.send_data(sid, data[off:off + size]); off += size
        conn.end_stream(sid); sent = True
    tls.sendall(conn.data_to_send())
head, _, rest = got.partition(b"\\n")
print(status, head.decode(), len(rest), rest == data, flush=True)
`;

/**
 * An independent HBONE server for interop tests: python3-h2 over TLS 1.3 on 0.0.0.0:15008, client
 * certificate required (verified against the CA). Each CONNECT stream gets 200, then one line
 * `seen=<json>` describing what the client presented — TLS version, ALPN, the SNI (null when none
 * was sent), the client certificate's URI SANs, the request headers — and then the stream's bytes
 * echoed until the client ends it.
 *   python3 -c PYTHON_HBONE_SERVER CERT KEY CA
 */
export const PYTHON_HBONE_SERVER = `
import json, socket, ssl, sys, threading
import h2.connection, h2.config, h2.events
cert, key, ca = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.verify_mode = ssl.CERT_REQUIRED
ctx.load_verify_locations(ca)
ctx.load_cert_chain(cert, key)
ctx.set_alpn_protocols(["h2"])
snis = {}
def on_sni(sock, name, _ctx):
    snis[id(sock)] = name
ctx.sni_callback = on_sni
def serve(raw):
    try:
        tls = ctx.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError):
        raw.close(); return
    sans = [v for k, v in tls.getpeercert().get("subjectAltName", ()) if k == "URI"]
    base = {"tls": tls.version(), "alpn": tls.selected_alpn_protocol(), "sni": snis.pop(id(tls), "no-callback"), "sans": sans}
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, validate_inbound_headers=False))
    conn.initiate_connection(); tls.sendall(conn.data_to_send())
    while True:
        try:
            chunk = tls.recv(65536)
        except OSError:
            break
        if not chunk: break
        for ev in conn.receive_data(chunk):
            if isinstance(ev, h2.events.RequestReceived):
                headers = {k.decode(): v.decode() for k, v in ev.headers}
                conn.send_headers(ev.stream_id, [(b":status", b"200")])
                conn.send_data(ev.stream_id, ("seen=%s\\n" % json.dumps(dict(base, headers=headers))).encode())
            elif isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if ev.data: conn.send_data(ev.stream_id, ev.data)
            elif isinstance(ev, h2.events.StreamEnded):
                conn.end_stream(ev.stream_id)
        tls.sendall(conn.data_to_send())
    tls.close()
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 15008)); s.listen(64)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`;

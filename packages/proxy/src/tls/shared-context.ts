/**
 * Client-side SecureContexts shared between upstream TLS settings that would build the same one.
 * istiod gives every outbound cluster the same ISTIO_MUTUAL transport socket (SDS `default` and
 * `ROOTCA`, differing only in the SAN to check and the SNI, which are not part of the context):
 * each cluster built its own context, parsing the same key, chain and roots, on its first
 * connection. Now the first builds it and the others take it, until a secret changes.
 *
 * Keyed by the secret objects themselves (a rotation makes new ones, so old contexts are never
 * handed out again and go when nothing uses them) and by the options from the cluster's config.
 * Contexts are never changed once built, so sharing them changes nothing but the work.
 * Server contexts are not shared: Node keeps TLS session ticket keys per context.
 */
import { createSecureContext, type SecureContext, type SecureContextOptions } from 'node:tls';

const NO_SECRET = {};
const byCert = new WeakMap<object, WeakMap<object, Map<string, SecureContext>>>();

/**
 * The context for `opts` (the config's `base` options plus the certificate secret's chain and key)
 * with roots `ca`, made from secrets `cert` / `validation` (either may be absent). A config that
 * names its own certificate or key (not a secret) gets a context of its own.
 */
export function sharedClientContext(cert: object | undefined, validation: object | undefined, base: SecureContextOptions, opts: SecureContextOptions, ca: Buffer | undefined, caFromValidation: boolean): SecureContext {
  if (base.cert !== undefined || base.key !== undefined) return createSecureContext(ca ? { ...opts, ca } : opts);
  let byValidation = byCert.get(cert ?? NO_SECRET);
  if (!byValidation) { byValidation = new WeakMap(); byCert.set(cert ?? NO_SECRET, byValidation); }
  let contexts = byValidation.get(validation ?? NO_SECRET);
  if (!contexts) { contexts = new Map(); byValidation.set(validation ?? NO_SECRET, contexts); }
  // The roots from the validation secret are that object's; roots from the config are part of the key.
  const key = JSON.stringify([base, caFromValidation || ca === undefined ? null : ca.toString('base64')]);
  let context = contexts.get(key);
  if (!context) {
    context = createSecureContext(ca ? { ...opts, ca } : opts);
    contexts.set(key, context);
  }
  return context;
}

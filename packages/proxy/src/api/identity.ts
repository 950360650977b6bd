/**
 * @skua/proxy/identity — workload identity as values: SPIFFE ids, X.509 keys and CSRs, Istio's CA
 * protocol and client, and the certificate manager that serves many SPIFFE identities in one
 * process (the sidecar is the one-identity case). Re-exports only.
 */
export { spiffeUri, parseSpiffeUri, type SpiffeId } from '../tls/spiffe.ts';
export {
  newKeyPair, privateKeyPem, makeCsr, certFacts, splitPem, importSigningKey, randomSerial, EC_P256,
  type CryptoKey, type CryptoKeyPair, type SigningKey, type CertFacts,
} from '../tls/x509.ts';
export { createCertificate, CaError, type CaClientOptions, type CaCredential } from '../tls/ca-client.ts';
export {
  CA_SERVICE, CREATE_CERTIFICATE_PATH, encodeRequest, decodeRequest, encodeResponse, decodeResponse,
  type CertificateRequest, type CertificateResponse,
} from '../tls/ca-protocol.ts';
export { parseGoDuration, secretManagerOptionsFromEnv, EnvError } from '../tls/identity-env.ts';
export { CertificateManager, caIssuer, type CertificateManagerOptions, type CertificateIssuer, type WorkloadCertificate } from '../tls/cert-manager.ts';

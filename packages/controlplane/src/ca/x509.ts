/**
 * @peculiar/x509 for the CA's certificate issuance (the data plane makes its keys and CSRs with
 * node:crypto alone, packages/proxy/src/tls/x509.ts). It needs reflect-metadata loaded first (its
 * ASN.1 schema uses decorators) and runs on Node's WebCrypto.
 */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

// Its typings name the DOM's Crypto.
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export { x509 };

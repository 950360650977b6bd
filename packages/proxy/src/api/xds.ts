/**
 * @skua/proxy/xds — the xDS protocol: the ADS client (SotW and Delta), the discovery wire codec
 * both ends use, resource decoding/encoding against Envoy's and Istio's protos, and type URLs.
 * Separate from the sidecar's config layer (@skua/proxy/envoy). Re-exports only.
 */
export {
  TYPE_URL, ADS_SERVICE, SOTW_METHOD, DELTA_METHOD,
  encodeSotwRequest, decodeSotwRequest, encodeSotwResponse, decodeSotwResponse,
  encodeDeltaRequest, decodeDeltaRequest, encodeDeltaResponse, decodeDeltaResponse,
  type AnyBytes, type RpcStatus, type SotwRequest, type SotwResponse, type DeltaRequest, type DeltaResource, type DeltaResponse,
} from '../xds/discovery.ts';
export { decodeResource, XdsDecodeError, type AnyResource } from '../xds/decode.ts';
export { encodeResource, toPlainMessage, structPlain, XdsEncodeError } from '../xds/encode.ts';
export { typeForUrl } from '../xds/protos.ts';
export { resourceName, DELTA_ONLY, SOTW_FULL_STATE, type XdsResource, type XdsHandler, type XdsUpdate, type XdsRejection } from '../xds/types.ts';
export { AdsClient, type AdsClientOptions } from '../xds/ads-client.ts';

/**
 * @skua/proxy/policy — the authorization engine over a plain facts record: compile Envoy RBAC
 * once, decide per connection or request from AuthzFacts (ztunnel and waypoint build the same
 * record from their own state). Re-exports only.
 */
export { compileRbac, RBAC_ACTIONS, type RbacEngine, type Decision, type RbacAction } from '../policy/engine.ts';
export type { AuthzFacts, RequestFacts, DynamicMetadata, HeaderValues } from '../policy/facts.ts';
export { connectionFacts, requestFacts } from '../policy/conn-facts.ts';
export {
  compileIstioAuthorization, decideIstio, peerIdentity,
  type IstioAuthorization, type IstioMatch, type IstioStringMatch, type IstioServiceAccountMatch, type CompiledIstioPolicy, type IstioDecision, type PeerIdentity,
} from '../policy/istio-authz.ts';

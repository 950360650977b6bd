import type { Msg } from '../config/fields.ts';

/** A compiled ListenerFilterChainMatchPredicate over what is known before listener filters run. */
export type DisabledPredicate = (destinationPort: number) => boolean;

export const NEVER_DISABLED: DisabledPredicate = () => false;

/**
 * envoy.config.listener.v3.ListenerFilterChainMatchPredicate: or_match, and_match,
 * not_match, any_match, destination_port_range ([start, end)). istiod uses it to
 * skip the tls/http inspectors on the ports it handles itself.
 */
export function compileFilterDisabled(m: Msg): DisabledPredicate {
  if (m.has('any_match')) return m.bool('any_match') ? () => true : NEVER_DISABLED;
  if (m.has('destination_port_range')) {
    const r = m.requiredMsg('destination_port_range');
    const start = r.num('start'), end = r.num('end');
    if (end <= start) throw r.error('end', 'must be greater than start (the range is [start, end))');
    return (port) => port >= start && port < end;
  }
  if (m.has('not_match')) {
    const inner = compileFilterDisabled(m.requiredMsg('not_match'));
    return (port) => !inner(port);
  }
  if (m.has('or_match')) {
    const rules = m.requiredMsg('or_match').list('rules').map(compileFilterDisabled);
    return (port) => rules.some((r) => r(port));
  }
  if (m.has('and_match')) {
    const rules = m.requiredMsg('and_match').list('rules').map(compileFilterDisabled);
    return (port) => rules.every((r) => r(port));
  }
  throw m.error('', 'one of or_match, and_match, not_match, any_match, destination_port_range is required');
}

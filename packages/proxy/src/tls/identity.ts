import { logger } from '../core/log.ts';
import { secretManagerOptionsFromEnv } from './identity-env.ts';
import { SecretManager } from './secret-manager.ts';
import { secrets } from './secrets.ts';

const log = logger('secret');

let running: SecretManager | undefined;

/**
 * Starts this process's secret manager when the environment asks for one and waits
 * for the first certificate (as a sidecar is not ready before it has one).
 * Throws on a malformed environment; undefined when no identity is configured.
 */
export async function startIdentityFromEnv(env: NodeJS.ProcessEnv): Promise<SecretManager | undefined> {
  const options = secretManagerOptionsFromEnv(env);
  if (!options) return undefined;
  running?.stop();
  const manager = new SecretManager(options, secrets);
  running = manager;
  log.info(`secret manager: requesting a certificate for ${options.identity} from ${options.ca?.client.address ?? options.filesDir}`);
  await manager.start();
  return manager;
}

/** The running secret manager of this process (main thread), if any. */
export function currentSecretManager(): SecretManager | undefined {
  return running;
}

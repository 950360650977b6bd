import { logger } from '../core/log.ts';
import { secretManagerOptionsFromEnv } from './identity-env.ts';
import { SecretManager } from './secret-manager.ts';
import { secrets, type SecretStore } from './secrets.ts';

const log = logger('secret');

/**
 * Starts a secret manager when the environment asks for one (the sidecar's one identity) and waits
 * for the first certificate (a sidecar is not ready before it has one). The caller owns the
 * manager (no process-wide registry). Throws on a malformed environment; undefined when no
 * identity is configured.
 */
export async function startIdentityFromEnv(env: NodeJS.ProcessEnv, store: SecretStore = secrets): Promise<SecretManager | undefined> {
  const options = secretManagerOptionsFromEnv(env);
  if (!options) return undefined;
  const manager = new SecretManager(options, store);
  log.info(`secret manager: requesting a certificate for ${options.identity} from ${options.ca?.client.address ?? options.filesDir}`);
  await manager.start();
  return manager;
}

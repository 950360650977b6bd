/**
 * Extension configs delivered by ECDS (TypedExtensionConfig), by name, per thread. A filter
 * with `config_discovery` takes its typed_config from here (or its default_config until one
 * arrives); a listener whose filters wait for a config with no default stays warming.
 */
import { ConfigError } from '../core/errors.ts';

type Json = Record<string, unknown>;

export interface ExtensionConfig {
  /** The TypedExtensionConfig's typed_config (undefined: istiod sends some without one). */
  readonly typedConfig: Json | undefined;
  readonly version: string;
}

const configs = new Map<string, ExtensionConfig>();

export function extensionConfig(name: string): ExtensionConfig | undefined {
  return configs.get(name);
}

export function setExtensionConfig(name: string, config: ExtensionConfig): void {
  configs.set(name, config);
}

export function removeExtensionConfig(name: string): void {
  configs.delete(name);
}

/** Thrown while compiling a filter whose ECDS config has not arrived and has no default. */
export class ExtensionConfigPending extends ConfigError {
  readonly extension: string;
  constructor(path: string, name: string) {
    super(path, `waiting for the ECDS extension config ${name}`);
    this.extension = name;
  }
}

/** A config value we cannot accept. `path` names the field, e.g. `static_resources.listeners[0].address`. */
export class ConfigError extends Error {
  readonly path: string;
  constructor(path: string, message: string) {
    super(path ? `${path}: ${message}` : message);
    this.name = 'ConfigError';
    this.path = path;
  }
}

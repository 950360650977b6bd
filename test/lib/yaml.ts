// The `yaml` package is a dependency of packages/proxy, not of the root: import it by path.
export { parse as parseYaml, stringify as toYaml } from '../../packages/proxy/node_modules/yaml/dist/index.js';

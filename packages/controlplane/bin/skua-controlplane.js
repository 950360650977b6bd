#!/usr/bin/env node
// skua-controlplane: the local xDS control plane (see src/main.ts). Needs Node >= 24 (type stripping).
import '../src/main.ts';

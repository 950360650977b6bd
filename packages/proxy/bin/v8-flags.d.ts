/** The V8 flags skua-proxy runs with from V8's start (why each: v8-flags.js). */
export declare const V8_FLAGS: readonly string[];
/** Restarts the process with any of V8_FLAGS it lacks (same pid); returns when none is missing. */
export declare function startWithV8Flags(): void;

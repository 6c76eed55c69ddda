#pragma once
// TIDEGATE_CPU_CLONES before a hot function compiles it for x86-64-v4, -v3 and baseline, and
// the loader picks one for the CPU it runs on (a GCC ifunc). Under ThreadSanitizer the ifunc
// resolvers run during relocation, before TSan's runtime is up, and crash the process, so
// that build keeps the baseline version only (its numbers are checked by the other builds).
#if defined(__SANITIZE_THREAD__)
#define TIDEGATE_CPU_CLONES
#else
#define TIDEGATE_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

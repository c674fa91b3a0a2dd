/* libkiln's C library baseline: glibc 2.28 (manylinux_2_28, docs/installing.md, "Wheels"), whatever
 * glibc the build machine has. Linked into libkiln alone (capi/meson.build, with -Wl,--wrap for each
 * symbol below), so that every glibc symbol it imports, from kiln's code and from the static
 * libstdc++ and libgcc alike, is one that glibc 2.28 exports:
 *  - symbols that glibc 2.34 moved into libc (dl*, pthread_*) are bound to their original versions
 *    (GLIBC_2.2.5 on x86-64, GLIBC_2.17 on AArch64); libdl.so.2 and libpthread.so.0 are NEEDED, which
 *    define them on older glibc and are empty stubs on newer;
 *  - fstat64 (a function only since 2.33) goes through __fxstat64, which every glibc has;
 *  - _dl_find_object (2.35; GCC 12's unwinder finds exception tables with it) is answered with
 *    dl_iterate_phdr, the way unwinders did before;
 *  - __libc_single_threaded (2.32; libstdc++ skips atomics with it) is libkiln's own, always 0,
 *    which only ever chooses the atomic path. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__x86_64__)
#define KILN_GLIBC_BASE "GLIBC_2.2.5"
#define KILN_STAT_VERSION 1 /* _STAT_VER_LINUX of x86-64's old <bits/stat.h> */
#elif defined(__aarch64__)
#define KILN_GLIBC_BASE "GLIBC_2.17"
#define KILN_STAT_VERSION 0 /* the generic _STAT_VER of AArch64 */
#else
#error "glibc_baseline.c knows the symbol versions of x86-64 and AArch64 only"
#endif

/* The original versions, under names of their own (.symver binds a reference to one version). */
void* kiln_old_dlopen(const char* file, int mode);
void* kiln_old_dlsym(void* handle, const char* name);
int kiln_old_dlclose(void* handle);
char* kiln_old_dlerror(void);
int kiln_old_pthread_create(pthread_t* thread, const pthread_attr_t* attributes, void* (*start)(void*), void* argument);
int kiln_old_pthread_join(pthread_t thread, void** result);
int kiln_old_pthread_once(pthread_once_t* once, void (*function)(void));
int kiln_old_pthread_key_create(pthread_key_t* key, void (*destructor)(void*));
int kiln_old_fxstat64(int version, int fd, struct stat64* buffer);
int kiln_old_dl_iterate_phdr(int (*callback)(struct dl_phdr_info*, size_t, void*), void* data);
__asm__(".symver kiln_old_dlopen, dlopen@" KILN_GLIBC_BASE);
__asm__(".symver kiln_old_dlsym, dlsym@" KILN_GLIBC_BASE);
__asm__(".symver kiln_old_dlclose, dlclose@" KILN_GLIBC_BASE);
__asm__(".symver kiln_old_dlerror, dlerror@" KILN_GLIBC_BASE);
__asm__(".symver kiln_old_pthread_create, pthread_create@" KILN_GLIBC_BASE);
__asm__(".symver kiln_old_pthread_join, pthread_join@" KILN_GLIBC_BASE);
__asm__(".symver kiln_old_pthread_once, pthread_once@" KILN_GLIBC_BASE);
__asm__(".symver kiln_old_pthread_key_create, __pthread_key_create@" KILN_GLIBC_BASE);
__asm__(".symver kiln_old_fxstat64, __fxstat64@" KILN_GLIBC_BASE);
__asm__(".symver kiln_old_dl_iterate_phdr, dl_iterate_phdr@" KILN_GLIBC_BASE);

#define KILN_HIDDEN __attribute__((visibility("hidden")))

KILN_HIDDEN char __libc_single_threaded = 0;

KILN_HIDDEN void* __wrap_dlopen(const char* file, int mode) { return kiln_old_dlopen(file, mode); }
KILN_HIDDEN void* __wrap_dlsym(void* handle, const char* name) { return kiln_old_dlsym(handle, name); }
KILN_HIDDEN int __wrap_dlclose(void* handle) { return kiln_old_dlclose(handle); }
KILN_HIDDEN char* __wrap_dlerror(void) { return kiln_old_dlerror(); }
KILN_HIDDEN int __wrap_pthread_create(pthread_t* thread, const pthread_attr_t* attributes, void* (*start)(void*),
                                      void* argument) {
  return kiln_old_pthread_create(thread, attributes, start, argument);
}
KILN_HIDDEN int __wrap_pthread_join(pthread_t thread, void** result) { return kiln_old_pthread_join(thread, result); }
KILN_HIDDEN int __wrap_pthread_once(pthread_once_t* once, void (*function)(void)) {
  return kiln_old_pthread_once(once, function);
}
KILN_HIDDEN int __wrap___pthread_key_create(pthread_key_t* key, void (*destructor)(void*)) {
  return kiln_old_pthread_key_create(key, destructor);
}
KILN_HIDDEN int __wrap_fstat64(int fd, struct stat64* buffer) { return kiln_old_fxstat64(KILN_STAT_VERSION, fd, buffer); }
KILN_HIDDEN int __wrap_fstat(int fd, struct stat* buffer) {
  /* struct stat and struct stat64 are one layout on both 64-bit ABIs. */
  return kiln_old_fxstat64(KILN_STAT_VERSION, fd, (struct stat64*)buffer);
}

struct kiln_find_object {
  uintptr_t pc;
  struct dl_find_object* result;
  int found;
};

/* The loaded object whose PT_LOAD segments hold pc, and its PT_GNU_EH_FRAME. */
static int kiln_find_object_in(struct dl_phdr_info* info, size_t size, void* data) {
  struct kiln_find_object* search = data;
  (void)size;
  uintptr_t start = UINTPTR_MAX, end = 0;
  int holds_pc = 0;
  const void* eh_frame = NULL;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* header = &info->dlpi_phdr[i];
    uintptr_t begin = info->dlpi_addr + header->p_vaddr;
    if (header->p_type == PT_LOAD) {
      if (begin < start) start = begin;
      if (begin + header->p_memsz > end) end = begin + header->p_memsz;
      if (search->pc >= begin && search->pc < begin + header->p_memsz) holds_pc = 1;
    } else if (header->p_type == PT_GNU_EH_FRAME) {
      eh_frame = (const void*)begin;
    }
  }
  if (!holds_pc) return 0;
  memset(search->result, 0, sizeof *search->result);
  search->result->dlfo_map_start = (void*)start;
  search->result->dlfo_map_end = (void*)end;
  search->result->dlfo_eh_frame = (void*)eh_frame;
  search->found = 1;
  return 1;
}

KILN_HIDDEN int __wrap__dl_find_object(void* pc, struct dl_find_object* result) {
  struct kiln_find_object search = {(uintptr_t)pc, result, 0};
  kiln_old_dl_iterate_phdr(kiln_find_object_in, &search);
  return search.found ? 0 : -1;
}

/* exec_shim: LD_PRELOAD library for the loopback adbd's shells. A phone runs aarch64 binaries natively; this host
 * has no binfmt_misc entry for them, so every exec of an aarch64 ELF is turned into
 * `qemu-aarch64-static -0 ARGV0 PATH ARGS...` (the same pid: exec replaces the caller, as on the phone).
 *
 * Interposed: execve, execv, execvp, execvpe (glibc's execvp calls execve internally, past the interposer, so it is
 * reimplemented here with the same PATH search). Anything that is not an aarch64 ELF is passed on untouched.
 * EDGEFLOW_QEMU names the emulator (default: qemu-aarch64-static on PATH). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*execve_fn)(const char *, char *const[], char *const[]);

static int is_aarch64_elf(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    Elf64_Ehdr h;
    ssize_t n = read(fd, &h, sizeof h);
    close(fd);
    return n == (ssize_t)sizeof h && memcmp(h.e_ident, ELFMAG, SELFMAG) == 0 && h.e_ident[EI_CLASS] == ELFCLASS64 &&
           h.e_machine == EM_AARCH64;
}

int execve(const char *path, char *const argv[], char *const envp[]) {
    static execve_fn real;
    if (!real) real = (execve_fn)dlsym(RTLD_NEXT, "execve");
    if (!is_aarch64_elf(path)) return real(path, argv, envp);
    const char *qemu = getenv("EDGEFLOW_QEMU");
    if (!qemu || !*qemu) qemu = "qemu-aarch64-static";
    int argc = 0;
    while (argv[argc]) argc++;
    /* qemu, -0, argv0, path, argv[1..], NULL */
    char **args = calloc((size_t)argc + 4, sizeof *args);
    if (!args) { errno = ENOMEM; return -1; }
    args[0] = (char *)qemu;
    args[1] = "-0";
    args[2] = argc ? argv[0] : (char *)path;
    args[3] = (char *)path;
    for (int i = 1; i < argc; i++) args[3 + i] = argv[i];
    if (strchr(qemu, '/')) real(qemu, args, envp);
    else execvpe(qemu, args, envp);  /* our own PATH search, below */
    int err = errno;
    fprintf(stderr, "loopback adbd: cannot run the aarch64 binary %s: %s not runnable (%s); install qemu-user-static\n",
            path, qemu, strerror(err));
    free(args);
    errno = err;
    return -1;
}

int execv(const char *path, char *const argv[]) {
    extern char **environ;
    return execve(path, argv, environ);
}

int execvpe(const char *file, char *const argv[], char *const envp[]) {
    if (strchr(file, '/')) return execve(file, argv, envp);
    const char *dirs = getenv("PATH");
    if (!dirs) dirs = "/usr/bin:/bin";
    char buf[4096];
    int err = ENOENT;
    for (const char *s = dirs;;) {
        const char *end = strchrnul(s, ':');
        size_t n = (size_t)(end - s);
        if (n + strlen(file) + 2 <= sizeof buf) {
            memcpy(buf, s, n);
            buf[n] = '/';
            strcpy(buf + n + 1, file);
            execve(buf, argv, envp);
            if (errno != ENOENT && errno != ENOTDIR) err = errno;
        }
        if (!*end) break;
        s = end + 1;
    }
    errno = err;
    return -1;
}

int execvp(const char *file, char *const argv[]) {
    extern char **environ;
    return execvpe(file, argv, environ);
}

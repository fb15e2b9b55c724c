/* pagecache_tool: page-cache eviction and residency for a device where Python is not available (an Android phone).
 *
 *   pagecache_tool evict FILE...     posix_fadvise(DONTNEED) each file, then print residency as below
 *   pagecache_tool resident FILE...  print "<resident pages> <total pages>" summed over the files
 *
 * Residency is mincore(2) over a PROT_READ shared mapping (bit 0 of each page's byte). No root needed. Built static
 * for aarch64 with Debian's cross compiler so it runs on Android as well as Linux. Exit status 2 on any error. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int residency(const char *path, unsigned long long *resident, unsigned long long *total) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0) { perror(path); close(fd); return -1; }
    long page = sysconf(_SC_PAGESIZE);
    size_t pages = ((size_t)st.st_size + page - 1) / page;
    if (pages == 0) { close(fd); return 0; }
    void *addr = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (addr == MAP_FAILED) { perror(path); return -1; }
    unsigned char *vec = malloc(pages);
    int rc = vec && mincore(addr, st.st_size, vec) == 0 ? 0 : -1;
    if (rc == 0) {
        for (size_t i = 0; i < pages; i++) *resident += vec[i] & 1;
        *total += pages;
    } else {
        perror(path);
    }
    free(vec);
    munmap(addr, st.st_size);
    return rc;
}

static int evict(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); return -1; }
    fdatasync(fd);
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    if (rc != 0) { fprintf(stderr, "%s: posix_fadvise: %s\n", path, strerror(rc)); return -1; }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "evict") != 0 && strcmp(argv[1], "resident") != 0)) {
        fprintf(stderr, "usage: %s evict|resident FILE...\n", argv[0]);
        return 2;
    }
    unsigned long long resident = 0, total = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[1], "evict") == 0 && evict(argv[i]) != 0) return 2;
        if (residency(argv[i], &resident, &total) != 0) return 2;
    }
    printf("%llu %llu\n", resident, total);
    return 0;
}

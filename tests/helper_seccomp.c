/*
 * tests/helper_seccomp.c - seccomp filters that kill a process at a chosen
 * system call, or make one fail (see seccomp_kill.h).
 */
#include "seccomp_kill.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The futex operation without its flags (FUTEX_PRIVATE_FLAG, FUTEX_CLOCK_REALTIME). */
#define FUTEX_OP_MASK 0x7fu

#define LOAD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define LOAD_ARG(i)                                                                                \
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args) + 8 * (i))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))

static int install(struct sock_filter *f, unsigned short n, unsigned flags)
{
    struct sock_fprog prog = {n, f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
}

int sk_kill_at_futex_wake(void)
{
    /* The low word of the op argument (little-endian x86-64 and arm64). */
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_AARCH64, 0, 6),
        LOAD_NR,
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_futex, 0, 4),
        LOAD_ARG(1),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, FUTEX_OP_MASK),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, FUTEX_WAKE, 0, 1),
        RET(SECCOMP_RET_KILL_PROCESS),
        RET(SECCOMP_RET_ALLOW),
    };
    return install(f, sizeof f / sizeof f[0], 0) < 0 ? -1 : 0;
}

int sk_fail_fallocate(int err)
{
    struct sock_filter f[] = {
        LOAD_NR,
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fallocate, 0, 1),
        RET(SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
        RET(SECCOMP_RET_ALLOW),
    };
    return install(f, sizeof f / sizeof f[0], 0) < 0 ? -1 : 0;
}

int sk_notify_all(void)
{
    struct sock_filter f[] = {
        LOAD_NR,
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sendmsg, 0, 1),
        RET(SECCOMP_RET_ALLOW),
        RET(SECCOMP_RET_USER_NOTIF),
    };
    return install(f, sizeof f / sizeof f[0], SECCOMP_FILTER_FLAG_NEW_LISTENER);
}

int sk_send_fd(int sock, int fd)
{
    char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec io = {&byte, 1};
    struct msghdr m = {0};
    memset(ctl, 0, sizeof ctl);
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
}

int sk_recv_fd(int sock)
{
    char byte, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec io = {&byte, 1};
    struct msghdr m = {0};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1)
        return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_type != SCM_RIGHTS)
        return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

/* The next notification, or -1 when the process is gone. */
static int next_call(int fd, struct seccomp_notif *req)
{
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (!(p.revents & POLLIN))
            return -1; /* POLLHUP: no process left under the filter */
        memset(req, 0, sizeof *req);
        if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, req) == 0)
            return 0;
        if (errno != EINTR && errno != ENOENT)
            return -1;
    }
}

static void let_through(int fd, const struct seccomp_notif *req)
{
    struct seccomp_notif_resp resp = {0};
    resp.id = req->id;
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    /* ENOENT: the caller was killed meanwhile (a signal ended the call). */
    ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

long sk_supervise(int fd, pid_t pid, long n, long marker, unsigned long marker_arg)
{
    struct seccomp_notif req;
    long seen = 0, rc = -1;
    int counting = 1;
    while (next_call(fd, &req) == 0) {
        if (counting && req.data.nr == marker && req.data.args[0] == marker_arg) {
            counting = 0;
            rc = seen;
        } else if (counting && ++seen == n) {
            kill(pid, SIGKILL);
            break;
        }
        let_through(fd, &req);
    }
    close(fd);
    return rc;
}

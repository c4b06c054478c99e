/* A VPN app's use of the C API, for tests/c_api.rs: it opens a TUN device itself (TUNSETIFF,
 * IFF_TUN | IFF_NO_PI, no virtio-net header), moves the interface into the applications' namespace
 * APP and sets it up there with ip(8), hands the descriptor to fastpath_tunnel_start, and checks a
 * TCP echo from APP to a server in its own namespace (which the tunnel relays to), byte for byte,
 * with the statistics read from another thread while it runs and the upstream socket handed to the
 * protect hook; then stops the tunnel from another thread and frees it.
 *
 * Usage: tunnel_echo APP IFNAME SERVER_IP  (run inside the namespace the tunnel relays from, where
 * SERVER_IP is an address of its own). Prints what it checked; exits 0 when all went well. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fastpath_tunnel.h"

#define BYTES (4 << 20)
#define PORT 7007

static const char *app_ns;
static const char *server_ip;
static struct fastpath_tunnel *tunnel;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "tunnel_echo: " __VA_ARGS__);                                          \
            fprintf(stderr, " (%s)\n", strerror(errno));                                           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static unsigned char pattern(size_t i) { return (unsigned char)(i * 31 + (i >> 12)); }

static void run(const char *command) {
    CHECK(system(command) == 0, "`%s` failed", command);
}

/* The server: accepts one connection and echoes it until the end of the stream. */
static void *echo_server(void *arg) {
    int listener = *(int *)arg;
    int c = accept(listener, NULL, NULL);
    CHECK(c >= 0, "accept");
    static char buf[65536];
    for (;;) {
        ssize_t n = read(c, buf, sizeof buf);
        CHECK(n >= 0, "server read");
        if (n == 0) break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(c, buf + off, (size_t)(n - off));
            CHECK(w > 0, "server write");
            off += w;
        }
    }
    shutdown(c, SHUT_WR);
    close(c);
    return NULL;
}

/* The application, on a thread that entered APP: writes BYTES, half-closes, reads them back. */
static void *application(void *arg) {
    (void)arg;
    char path[256];
    snprintf(path, sizeof path, "/var/run/netns/%s", app_ns);
    int ns = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(ns >= 0, "open %s", path);
    CHECK(setns(ns, CLONE_NEWNET) == 0, "setns %s", path);
    close(ns);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0, "socket");
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(PORT)};
    inet_pton(AF_INET, server_ip, &to.sin_addr);
    CHECK(connect(s, (struct sockaddr *)&to, sizeof to) == 0, "connect to %s through the tunnel", server_ip);
    unsigned char *out = malloc(BYTES), *back = malloc(BYTES);
    for (size_t i = 0; i < BYTES; i++) out[i] = pattern(i);
    size_t sent = 0, got = 0;
    /* Write and read in turn, a piece at a time, so neither side's buffers fill. */
    while (got < BYTES) {
        if (sent < BYTES) {
            size_t n = BYTES - sent < 65536 ? BYTES - sent : 65536;
            ssize_t w = write(s, out + sent, n);
            CHECK(w > 0, "application write");
            sent += (size_t)w;
            if (sent == BYTES) shutdown(s, SHUT_WR);
        }
        ssize_t r = read(s, back + got, BYTES - got);
        CHECK(r > 0, "application read after %zu bytes", got);
        got += (size_t)r;
    }
    char extra;
    CHECK(read(s, &extra, 1) == 0, "the end of the echo");
    CHECK(memcmp(out, back, BYTES) == 0, "the echo differs");
    /* The statistics, read from this thread while the tunnel runs. */
    struct fastpath_tunnel_stats st;
    CHECK(fastpath_tunnel_stats(tunnel, &st) == FASTPATH_TUNNEL_OK, "stats: %s", fastpath_tunnel_last_error());
    CHECK(st.tcp_flows == 1, "tcp_flows %llu", (unsigned long long)st.tcp_flows);
    CHECK(st.tcp_up == BYTES, "tcp_up %llu", (unsigned long long)st.tcp_up);
    CHECK(st.tun_rx_packets > 0 && st.tun_tx_bytes > BYTES, "tun counters %llu %llu",
          (unsigned long long)st.tun_rx_packets, (unsigned long long)st.tun_tx_bytes);
    close(s);
    free(out);
    free(back);
    printf("echoed %d bytes through the tunnel\n", BYTES);
    return NULL;
}

/* The protect hook: counts the sockets the tunnel opens towards the network (a VPN app would call
 * VpnService.protect here), on the tunnel's threads. */
static int protect(void *context, int fd) {
    CHECK(fd >= 0, "protect got descriptor %d", fd);
    __atomic_fetch_add((int *)context, 1, __ATOMIC_SEQ_CST);
    return 0;
}

static void *stopper(void *arg) {
    (void)arg;
    fastpath_tunnel_stop(tunnel);
    return NULL;
}

int main(int argc, char **argv) {
    CHECK(argc == 4, "usage: tunnel_echo APP IFNAME SERVER_IP");
    app_ns = argv[1];
    server_ip = argv[3];
    char command[512];

    /* Errors come back as codes and messages, never as a crash. */
    CHECK(fastpath_tunnel_start(-1, NULL) == NULL, "a negative descriptor started");
    CHECK(fastpath_tunnel_last_error_code() == FASTPATH_TUNNEL_ERROR_DESCRIPTOR, "error code %d",
          fastpath_tunnel_last_error_code());
    int not_tun = open("/dev/null", O_RDWR);
    CHECK(fastpath_tunnel_start(not_tun, NULL) == NULL, "/dev/null started");
    CHECK(fastpath_tunnel_last_error_code() == FASTPATH_TUNNEL_ERROR_DESCRIPTOR, "/dev/null: %s",
          fastpath_tunnel_last_error());
    printf("refused: %s\n", fastpath_tunnel_last_error());

    /* The server, on an address of this namespace. */
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons(PORT)};
    inet_pton(AF_INET, server_ip, &at.sin_addr);
    CHECK(bind(listener, (struct sockaddr *)&at, sizeof at) == 0, "bind %s", server_ip);
    CHECK(listen(listener, 8) == 0, "listen");

    /* The TUN device, opened as a VPN app's privileged helper would, then moved to APP. */
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    CHECK(fd >= 0, "open /dev/net/tun");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    strncpy(ifr.ifr_name, argv[2], IFNAMSIZ - 1);
    CHECK(ioctl(fd, TUNSETIFF, &ifr) == 0, "TUNSETIFF");
    snprintf(command, sizeof command, "ip link set dev %s netns %s", ifr.ifr_name, app_ns);
    run(command);
    snprintf(command, sizeof command,
             "ip -n %s addr add 10.66.0.1/24 dev %s && ip -n %s link set dev %s up && "
             "ip -n %s route replace default dev %s",
             app_ns, ifr.ifr_name, app_ns, ifr.ifr_name, app_ns, ifr.ifr_name);
    run(command);

    struct fastpath_tunnel_config config = {0};
    config.addr = "10.66.0.2/24";
    config.max_tcp_flows = 64;
    static int protected_sockets;
    config.protect = protect;
    config.protect_context = &protected_sockets;
    tunnel = fastpath_tunnel_start(fd, &config);
    CHECK(tunnel != NULL, "fastpath_tunnel_start: %s", fastpath_tunnel_last_error());

    pthread_t server, app, stop;
    CHECK(pthread_create(&server, NULL, echo_server, &listener) == 0, "server thread");
    CHECK(pthread_create(&app, NULL, application, NULL) == 0, "application thread");
    pthread_join(app, NULL);
    pthread_join(server, NULL);

    /* Stopped from another thread; freed here once it has. */
    CHECK(pthread_create(&stop, NULL, stopper, NULL) == 0, "stopper thread");
    pthread_join(stop, NULL);
    struct fastpath_tunnel_stats st;
    CHECK(fastpath_tunnel_stats(tunnel, &st) == FASTPATH_TUNNEL_OK, "stats");
    CHECK(fastpath_tunnel_free(tunnel) == FASTPATH_TUNNEL_OK, "free: %s", fastpath_tunnel_last_error());
    printf("stats: tcp_flows %llu tcp_up %llu tcp_down %llu tun_rx_packets %llu tun_tx_packets %llu "
           "stack_drops %llu\n",
           (unsigned long long)st.tcp_flows, (unsigned long long)st.tcp_up,
           (unsigned long long)st.tcp_down, (unsigned long long)st.tun_rx_packets,
           (unsigned long long)st.tun_tx_packets, (unsigned long long)st.stack_drops);
    CHECK(st.tcp_down == BYTES, "tcp_down %llu", (unsigned long long)st.tcp_down);
    CHECK(__atomic_load_n(&protected_sockets, __ATOMIC_SEQ_CST) == 1, "protect called %d times",
          protected_sockets);
    printf("protect called for the one upstream socket\n");
    close(listener);
    printf("ok\n");
    return 0;
}

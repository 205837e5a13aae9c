// The ingress deparser every target shares: headers in wire order.
#ifndef JUMBOGATE_DEPARSER_P4
#define JUMBOGATE_DEPARSER_P4

#include <core.p4>
#include "headers.p4"

// Emits every header in wire order; invalid ones emit nothing. A generated
// ICMP error's headers come right after Ethernet/VLAN, followed by its quote.
control JumbogateDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vlan);
        EMIT_SIGNAL_HEADERS(packet, hdr)
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_options);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.tcp);
        EMIT_TCP_OPTIONS(packet, hdr.tcp_options)
        packet.emit(hdr.udp);
        packet.emit(hdr.icmp);
        packet.emit(hdr.geneve);
        packet.emit(hdr.geneve_options);
        packet.emit(hdr.inner_ethernet);
        packet.emit(hdr.inner_ipv4);
        packet.emit(hdr.inner_ipv4_options);
        packet.emit(hdr.inner_ipv6);
        packet.emit(hdr.inner_tcp);
        EMIT_TCP_OPTIONS(packet, hdr.inner_tcp_options)
        packet.emit(hdr.inner_udp);
    }
}

#endif

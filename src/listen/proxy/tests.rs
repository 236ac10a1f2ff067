use super::*;
use proptest::prelude::*;

/// A version 2 header as HAProxy's `send-proxy-v2` writes it, built with the crate's builder
/// (an independent writer of the format), with `tlv` bytes of a TLV after the addresses.
fn v2_header(command: v2::Command, from: SocketAddr, to: SocketAddr, tlv: usize) -> Vec<u8> {
    let mut builder =
        v2::Builder::with_addresses(v2::Version::Two | command, v2::Protocol::Stream, (from, to));
    if tlv > 0 {
        builder = builder.write_tlv(0xE0_u8, &vec![7u8; tlv]).unwrap();
    }
    builder.build().unwrap()
}

fn read(bytes: &[u8]) -> (Result<Proxied, ProxyError>, Vec<u8>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut input = bytes;
    let result = rt.block_on(read_header(&mut input, Duration::from_secs(1)));
    (result, input.to_vec())
}

#[test]
fn version_1_headers_name_the_client_and_leave_what_follows() {
    let (got, rest) = read(b"PROXY TCP4 127.0.0.2 127.0.0.1 51000 50001\r\n{\"id\":1}\n");
    assert_eq!(
        got.unwrap(),
        Proxied::Client("127.0.0.2:51000".parse().unwrap())
    );
    assert_eq!(rest, b"{\"id\":1}\n");
    let (got, _) = read(b"PROXY TCP6 2001:db8::7 2001:db8::1 51000 50001\r\n");
    assert_eq!(
        got.unwrap(),
        Proxied::Client("[2001:db8::7]:51000".parse().unwrap())
    );
    let (got, rest) = read(b"PROXY UNKNOWN\r\nGET /health HTTP/1.1\r\n");
    assert_eq!(got.unwrap(), Proxied::Balancer);
    assert_eq!(rest, b"GET /health HTTP/1.1\r\n");
}

#[test]
fn version_2_headers_name_the_client_skip_tlvs_and_local_is_the_balancer() {
    let from: SocketAddr = "127.0.0.3:40000".parse().unwrap();
    let to: SocketAddr = "127.0.0.1:50001".parse().unwrap();
    for tlv in [0, 1, 40, 400, 1000] {
        let mut bytes = v2_header(v2::Command::Proxy, from, to, tlv);
        bytes.extend_from_slice(b"after");
        let (got, rest) = read(&bytes);
        assert_eq!(got.unwrap(), Proxied::Client(from), "{tlv} TLV bytes");
        assert_eq!(rest, b"after");
    }
    let from6: SocketAddr = "[2001:db8::3]:40000".parse().unwrap();
    let to6: SocketAddr = "[2001:db8::1]:50001".parse().unwrap();
    let (got, _) = read(&v2_header(v2::Command::Proxy, from6, to6, 0));
    assert_eq!(got.unwrap(), Proxied::Client(from6));
    let (got, _) = read(&v2_header(v2::Command::Local, from, to, 0));
    assert_eq!(got.unwrap(), Proxied::Balancer);
    // An IPv4-mapped client is counted as the IPv4 host it is.
    let mapped: SocketAddr = "[::ffff:127.0.0.2]:1".parse().unwrap();
    let (got, _) = read(&v2_header(v2::Command::Proxy, mapped, to6, 0));
    assert_eq!(
        got.unwrap(),
        Proxied::Client("127.0.0.2:1".parse().unwrap())
    );
}

#[test]
fn what_is_no_whole_header_is_refused() {
    let from: SocketAddr = "127.0.0.3:40000".parse().unwrap();
    let to: SocketAddr = "127.0.0.1:50001".parse().unwrap();
    let whole = v2_header(v2::Command::Proxy, from, to, 0);
    // Cut anywhere: the connection ends before the header does.
    for cut in 0..whole.len() {
        let (got, _) = read(&whole[..cut]);
        assert!(
            matches!(got, Err(ProxyError::Io(_))),
            "cut at {cut}: {got:?}"
        );
    }
    // Longer than cairn reads: refused from its length alone.
    let long = v2_header(v2::Command::Proxy, from, to, 1100);
    assert!(matches!(read(&long).0, Err(ProxyError::TooLong(_))));
    let line = format!("PROXY TCP4 {}\r\n", "1".repeat(120));
    assert!(matches!(
        read(line.as_bytes()).0,
        Err(ProxyError::TooLong(107))
    ));
    for bad in [
        &b"{\"id\":1,\"method\":\"server.version\"}\n"[..],
        b"GET / HTTP/1.1\r\n",
        b"\x16\x03\x01\x02\x00",
        b"\r\n\r\n\x00\r\nQUIX\n\x21\x11\x00\x0c",
    ] {
        assert!(matches!(read(bad).0, Err(ProxyError::Missing)), "{bad:?}");
    }
    for bad in [
        &b"PROXY TCP4 127.0.0.2 127.0.0.1 51000\r\n"[..],
        b"PROXY TCP4 300.0.0.2 127.0.0.1 51000 50001\r\n",
        b"PROXY UDP4 127.0.0.2 127.0.0.1 51000 50001\r\n",
        b"PROXYTCP4\r\n",
        b"PROXY TCP4 0.0.0.0 127.0.0.1 51000 50001\r\n",
    ] {
        assert!(
            matches!(read(bad).0, Err(ProxyError::Malformed(_))),
            "{bad:?}"
        );
    }
    // Version 2 with a version nibble other than 2.
    let mut wrong = whole.clone();
    wrong[12] = 0x31;
    assert!(matches!(read(&wrong).0, Err(ProxyError::Malformed(_))));
}

#[test]
fn a_header_that_never_comes_times_out() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (mut silent, _keep) = tokio::io::duplex(64);
    let got = rt.block_on(read_header(&mut silent, Duration::from_millis(50)));
    assert!(matches!(got, Err(ProxyError::Timeout(_))), "{got:?}");
}

#[test]
fn an_opening_header_is_told_apart_from_requests_and_blank_lines() {
    assert_eq!(opens_with_header(b"PROXY TCP4 1.2.3.4\r\n"), Some(true));
    assert_eq!(opens_with_header(v2::PROTOCOL_PREFIX), Some(true));
    // A blank line may be the start of version 2's signature: not decided yet.
    assert_eq!(opens_with_header(b"\r\n"), None);
    assert_eq!(opens_with_header(b"\r\n\r\n\0\r\n"), None);
    assert_eq!(opens_with_header(b"\r\n{\"id\":1}\n"), Some(false));
    assert_eq!(opens_with_header(b"{\"jsonrpc\":\"2.0\"}"), Some(false));
    assert_eq!(opens_with_header(b"PROXY\n"), Some(false));
    assert_eq!(opens_with_header(b"\n"), Some(false));
}

#[test]
fn balancers_are_the_listed_subnets_and_their_waiting_places_are_bounded() {
    let balancers = Balancers::new(vec!["127.0.0.1/32".parse().unwrap()]);
    assert!(balancers.trusts("127.0.0.1".parse().unwrap()));
    assert!(balancers.trusts("::ffff:127.0.0.1".parse().unwrap()));
    assert!(!balancers.trusts("127.0.0.2".parse().unwrap()));
    assert!(!Balancers::new(Vec::new()).trusts("127.0.0.1".parse().unwrap()));
    let held: Vec<_> = (0..PENDING)
        .map(|_| balancers.wait_place().unwrap())
        .collect();
    assert!(balancers.wait_place().is_none());
    drop(held);
    assert!(balancers.wait_place().is_some());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any bytes: the reader never panics, never reads past a header it accepts, and never
    /// reads more than the longest header.
    #[test]
    fn any_bytes_are_read_within_bounds(bytes in proptest::collection::vec(any::<u8>(), 0..1200)) {
        let (got, rest) = read(&bytes);
        let used = bytes.len() - rest.len();
        prop_assert!(used <= MAX_HEADER);
        if got.is_ok() {
            prop_assert_eq!(parse(&bytes[..used]).ok(), got.ok());
        }
    }

    /// Every IPv4 or IPv6 client written in either version reads back as that client.
    #[test]
    fn written_headers_read_back(
        v6 in any::<bool>(), a in any::<[u8; 16]>(), port in any::<u16>(), tlv in 0usize..300,
    ) {
        let ip: IpAddr = match v6 {
            true => std::net::Ipv6Addr::from(a).into(),
            false => std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).into(),
        };
        prop_assume!(!ip.to_canonical().is_unspecified());
        let from = SocketAddr::new(ip, port);
        let to = SocketAddr::new(ip, 50001);
        let want = Proxied::Client(SocketAddr::new(ip.to_canonical(), port));
        prop_assert_eq!(read(&v2_header(v2::Command::Proxy, from, to, tlv)).0.unwrap(), want);
        let line = match from {
            SocketAddr::V4(_) => format!("PROXY TCP4 {ip} {ip} {port} 50001\r\n"),
            SocketAddr::V6(_) => format!("PROXY TCP6 {ip} {ip} {port} 50001\r\n"),
        };
        prop_assert_eq!(read(line.as_bytes()).0.unwrap(), want);
    }
}

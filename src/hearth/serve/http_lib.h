// cpp-httplib as Debian ships it: a compiled library (libcpp-httplib.so) built with TLS,
// zlib and brotli support. Its classes change layout with these switches, so every file that
// includes httplib.h must see the same ones as the library did (its pkg-config Cflags).
#pragma once

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>

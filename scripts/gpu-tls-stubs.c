/* Device-build stubs for the fleet build (scripts/gpu-prepare.sh --fleet, .gpu/build.sh --fleet).
 *
 * Debian's libmicrohttpd.a is built with HTTPS support, so it refers to GnuTLS; GnuTLS's own static archives need
 * p11-kit's and libunistring's, which Debian does not ship, so a static GnuTLS cannot be carried to the GPU machine.
 * kgym never turns TLS on (no MHD_USE_TLS: docs/service.md, "No TLS"), so of these only gnutls_global_init and
 * gnutls_global_deinit run (libmicrohttpd's constructor and destructor call them); every other one fails loudly
 * if it is ever reached.  The symbols are those `nm -u libmicrohttpd.a` lists (libmicrohttpd 0.9.75, Debian 12); a
 * newer archive that needs another fails the link test that gpu-prepare.sh --fleet runs, not a run on the GPU. */
#include <stdio.h>
#include <stdlib.h>

int gnutls_global_init(void);
void gnutls_global_deinit(void);
const char *gnutls_strerror(int error);

int gnutls_global_init(void) { return 0; }
void gnutls_global_deinit(void) {}
const char *gnutls_strerror(int error)
{
    (void)error;
    return "TLS is not in this build of kgym";
}

void *(*gnutls_malloc)(size_t) = malloc;

static void tls_absent(const char *name)
{
    fprintf(stderr, "kgym: %s called, but this build has no TLS (scripts/gpu-tls-stubs.c)\n", name);
    abort();
}

#define ABSENT(name)                                                                                                   \
    int name(void);                                                                                                    \
    int name(void)                                                                                                     \
    {                                                                                                                  \
        tls_absent(#name);                                                                                             \
        return -1;                                                                                                     \
    }

ABSENT(gnutls_alpn_set_protocols)
ABSENT(gnutls_bye)
ABSENT(gnutls_certificate_allocate_credentials)
ABSENT(gnutls_certificate_free_credentials)
ABSENT(gnutls_certificate_server_set_request)
ABSENT(gnutls_certificate_set_dh_params)
ABSENT(gnutls_certificate_set_retrieve_function2)
ABSENT(gnutls_certificate_set_retrieve_function3)
ABSENT(gnutls_certificate_set_x509_key_mem)
ABSENT(gnutls_certificate_set_x509_key_mem2)
ABSENT(gnutls_certificate_set_x509_trust_mem)
ABSENT(gnutls_cipher_get)
ABSENT(gnutls_credentials_set)
ABSENT(gnutls_deinit)
ABSENT(gnutls_dh_params_deinit)
ABSENT(gnutls_dh_params_import_pkcs3)
ABSENT(gnutls_dh_params_init)
ABSENT(gnutls_handshake)
ABSENT(gnutls_init)
ABSENT(gnutls_priority_deinit)
ABSENT(gnutls_priority_init)
ABSENT(gnutls_priority_set)
ABSENT(gnutls_protocol_get_version)
ABSENT(gnutls_psk_allocate_server_credentials)
ABSENT(gnutls_psk_free_server_credentials)
ABSENT(gnutls_psk_set_server_credentials_function)
ABSENT(gnutls_record_check_pending)
ABSENT(gnutls_record_get_direction)
ABSENT(gnutls_record_recv)
ABSENT(gnutls_record_send)
ABSENT(gnutls_session_get_ptr)
ABSENT(gnutls_session_set_ptr)
ABSENT(gnutls_transport_set_int2)

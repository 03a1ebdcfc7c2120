// The chat page served at /: page.html, embedded into the binary at build time.
__asm__(".section .rodata\n"
        ".global srv_page_html\n"
        ".type srv_page_html, @object\n"
        "srv_page_html:\n"
        ".incbin \"src/server/page.html\"\n"
        ".byte 0\n"
        ".global srv_page_html_len\n"
        ".type srv_page_html_len, @object\n"
        ".balign 4\n"
        "srv_page_html_len:\n"
        ".long srv_page_html_len - srv_page_html - 1\n"
        ".section .note.GNU-stack,\"\",@progbits\n"
        ".text\n");

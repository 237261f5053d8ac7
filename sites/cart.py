"""The shopping flow: add to cart → cart (kept in a cookie) → checkout form → order confirmation.

The cart lives only in the browser's ``cart`` cookie (``slug:qty.slug:qty``), so browser contexts
never share a cart and the server keeps no state. The confirmation URL carries the ordered lines
and the cleaned checkout values; its order reference is a hash of both.
"""

from __future__ import annotations

from collections.abc import Mapping

from sites.catalogues import Item, money
from sites.data import Site
from sites.domains import EMAIL, NAME
from sites.flows import Outcome, form_html, redirect, summary_table
from sites.forms import FieldSpec, reference, validate
from sites.layout import CART_COOKIE, cart_lines, esc, url
from sites.pages import detail

QUANTITY = FieldSpec("quantity", "Quantity", "int", low=1, high=10)
CHECKOUT_FIELDS = (
    NAME,
    EMAIL,
    FieldSpec("address", "Street address"),
    FieldSpec("city", "Town or city"),
    FieldSpec("postcode", "Postcode", "postcode"),
)


def encode_cart(lines: list[tuple[str, int]]) -> str:
    return ".".join(f"{slug}:{quantity}" for slug, quantity in lines)


def _cookie(lines: list[tuple[str, int]]) -> str:
    if not lines:
        return f"{CART_COOKIE}=; Path=/; Max-Age=0; SameSite=Lax"
    return f"{CART_COOKIE}={encode_cart(lines)}; Path=/; SameSite=Lax"


def _priced(site: Site, lines: list[tuple[str, int]]) -> list[tuple[Item, int]]:
    return [(site.by_slug[slug], quantity) for slug, quantity in lines if slug in site.by_slug]


def order_total(priced: list[tuple[Item, int]]) -> str:
    return money(round(sum(item.value * quantity for item, quantity in priced), 2))


def buy_box(item: Item, error: str = "", quantity: str = "1") -> str:
    """The add-to-cart form of a detail page."""
    if item.field("Availability") == "Out of stock":
        return '<p class="error">Out of stock: this product cannot be ordered right now.</p>'
    message = f'<p class="error" id="e-quantity">{esc(error)}</p>' if error else ""
    return (
        f'<form class="panel" method="post" action="/cart/add" novalidate>{message}'
        f'<input type="hidden" name="slug" value="{esc(item.slug)}">'
        f'<label for="f-quantity">Quantity</label> <input type="text" inputmode="numeric" '
        f'id="f-quantity" name="quantity" value="{esc(quantity)}" size="3"> '
        f'<button type="submit">Add to cart</button></form>'
    )


def add(site: Site, form: Mapping[str, str], cookies: Mapping[str, str]) -> Outcome:
    item = site.by_slug.get(form.get("slug", ""))
    if item is None:
        return Outcome("Product not found", "<h1>Product not found</h1>", status=404)
    values, errors = validate((QUANTITY,), form)
    if not errors and item.field("Availability") == "Out of stock":
        errors = {"quantity": "This product is out of stock."}
    if errors:
        action = buy_box(item, errors["quantity"], form.get("quantity", ""))
        title, main = detail(site, item, action)
        return Outcome(title, main)
    lines = dict(cart_lines(cookies))
    lines[item.slug] = min(99, lines.get(item.slug, 0) + int(values["quantity"]))
    return redirect("/cart", _cookie(list(lines.items())))


def update(site: Site, form: Mapping[str, str], cookies: Mapping[str, str]) -> Outcome:
    """Set one line's quantity; 0 (or the remove button) drops the line."""
    slug = form.get("slug", "")
    quantity = form.get("quantity", "0")
    lines = dict(cart_lines(cookies))
    if quantity.isdigit() and 0 < int(quantity) <= 10:
        lines[slug] = int(quantity)
    else:
        lines.pop(slug, None)
    return redirect("/cart", _cookie([(s, q) for s, q in lines.items() if s in site.by_slug]))


def _lines_table(site: Site, priced: list[tuple[Item, int]], editable: bool) -> str:
    rows = []
    for item, quantity in priced:
        line_total = money(round(item.value * quantity, 2))
        amount = str(quantity)
        if editable:
            amount = (
                f'<form method="post" action="/cart/update"><input type="hidden" name="slug" '
                f'value="{esc(item.slug)}"><input type="text" inputmode="numeric" name="quantity" '
                f'value="{quantity}" size="2" aria-label="Quantity of {esc(item.name)}"> '
                '<button type="submit">Update</button> <button type="submit" name="quantity" '
                'value="0" class="ghost">Remove</button></form>'
            )
        rows.append(
            f'<tr><td><a href="{site.item_path(item)}">{esc(item.name)}</a></td>'
            f"<td>{esc(item.value_text)}</td><td>{amount}</td><td>{line_total}</td></tr>"
        )
    return (
        '<table class="cart"><thead><tr><th>Product</th><th>Price</th><th>Quantity</th>'
        f"<th>Subtotal</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f'<p class="value">Order total: {order_total(priced)}</p>'
    )


def view(site: Site, cookies: Mapping[str, str]) -> Outcome:
    priced = _priced(site, cart_lines(cookies))
    if not priced:
        main = (
            '<h1>Your cart</h1><p class="notice">Your cart is empty. '
            f'<a href="{site.listing_path}">Browse all products</a>.</p>'
        )
        return Outcome("Your cart", main)
    main = (
        f"<h1>Your cart</h1>{_lines_table(site, priced, editable=True)}"
        '<p><a class="button" href="/checkout">Proceed to checkout</a> '
        f'<a href="{site.listing_path}">Continue shopping</a></p>'
    )
    return Outcome("Your cart", main)


def checkout(
    site: Site, form: Mapping[str, str], cookies: Mapping[str, str], method: str
) -> Outcome:
    lines = [(item.slug, quantity) for item, quantity in _priced(site, cart_lines(cookies))]
    if not lines:
        return view(site, cookies)
    values, errors = validate(CHECKOUT_FIELDS, form)
    if method == "POST" and not errors:
        target = url("/checkout/confirmed", items=encode_cart(lines), **values)
        return redirect(target, _cookie([]))
    shown = errors if method == "POST" else {}
    main = (
        "<h1>Checkout</h1><h2>Your order</h2>"
        + _lines_table(site, _priced(site, lines), editable=False)
        + "<h2>Delivery details</h2><p>Delivery is free on every order.</p>"
        + form_html(
            CHECKOUT_FIELDS, values if method == "POST" else {}, shown, "/checkout", "Place order"
        )
    )
    return Outcome("Checkout", main)


def order_reference(site: Site, items: str, values: Mapping[str, str]) -> str:
    """The order's reference: the same whatever order the products went into the cart."""
    canonical = encode_cart(sorted(cart_lines({CART_COOKIE: items})))
    return reference(
        site.reference_prefix, site.site_id, "checkout", {**values, "items": canonical}
    )


def confirmed(site: Site, query: Mapping[str, str]) -> Outcome:
    lines = cart_lines({CART_COOKIE: query.get("items", "")})
    priced = _priced(site, lines)
    values, errors = validate(CHECKOUT_FIELDS, query)
    if errors or not priced or len(priced) != len(lines):
        main = (
            "<h1>Order not found</h1><p>This confirmation link is incomplete. "
            '<a href="/cart">Go to your cart</a>.</p>'
        )
        return Outcome("Order not found", main, status=404)
    code = order_reference(site, encode_cart(lines), values)
    address = f"{values['address']}, {values['city']} {values['postcode']}"
    main = (
        f'<h1>Thank you for your order</h1><div class="notice"><p>Thank you, '
        f'{esc(values["name"])}. Your order reference is</p><p class="reference">{code}</p>'
        f"<p>A confirmation has been sent to {esc(values['email'])}.</p></div>"
        f"<h2>Order summary</h2>{_lines_table(site, priced, editable=False)}"
        + summary_table([("Deliver to", values["name"]), ("Address", address)])
    )
    return Outcome("Order confirmed", main)

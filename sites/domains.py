"""The eight domains of the practice web: what each calls things, how its pages and tasks talk
about them, its form flow and its catalogue generator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from random import Random

from sites import catalogues as c
from sites.catalogues import BOOKABLE_FROM, BOOKABLE_UNTIL, Item
from sites.forms import FieldSpec, FlowSpec


@dataclass(frozen=True)
class DomainSpec:
    """What a domain calls things and how its pages and tasks talk about them."""

    domain: str
    label: str  # suffix of site ids: brightkettle-shop
    noun: str
    plural: str  # also the listing path: /products
    value_label: str
    category_label: str
    superlatives: tuple[str, str]  # the items with the lowest and the highest value
    card_fields: tuple[str, ...]  # shown on cards and rows next to the value
    askable: tuple[str, ...]  # fields an easy task may ask about
    name_suffixes: tuple[str, ...]
    heroes: tuple[str, ...]
    contact_topics: tuple[str, ...]
    flow: FlowSpec | None  # None: the shopping cart and checkout
    make: Callable[[Random, int, str], list[Item]]
    rating_scale: int | None = None
    value_suffix: str = ""  # shown after the value on cards: "per night", "a year"
    date_sort: tuple[str, bool] | None = None  # (label, newest first)


NAME = FieldSpec("name", "Full name")
EMAIL = FieldSpec("email", "Email address", "email")
WHEN = dict(low=BOOKABLE_FROM.isoformat(), high=BOOKABLE_UNTIL.isoformat(), hint="YYYY-MM-DD")

DOMAINS: dict[str, DomainSpec] = {
    spec.domain: spec
    for spec in (
        DomainSpec(
            "shopping", "shop", "product", "products", "Price", "Category",
            ("cheapest", "most expensive"), ("Brand",), ("Brand", "Colour", "SKU"),
            ("Goods", "Store", "Market", "Supply"),
            ("Everyday things, made well", "New season, new favourites", "Good design for less"),
            ("Order question", "Returns and refunds", "Product advice", "Something else"),
            None, c.shopping, rating_scale=5,
        ),
        DomainSpec(
            "travel", "stays", "hotel", "hotels", "Price per night", "City",
            ("cheapest", "most expensive"), ("Neighbourhood", "Stars"),
            ("Neighbourhood", "Check-in time", "Distance to centre"), ("Stays", "Hotels", "Travel"),
            ("Find your next stay", "Rooms with a view, rates without surprises"),
            ("Existing booking", "Change or cancel", "Group booking", "Something else"),
            FlowSpec("book", "Book this hotel", "Book your stay", "Review your booking",
                     "Booking confirmed", "Booking reference",
                     (FieldSpec("checkin", "Check-in date", "date", **WHEN),
                      FieldSpec("nights", "Nights", "int", low=1, high=14),
                      FieldSpec("guests", "Guests", "int", low=1, high=6), NAME, EMAIL,
                      FieldSpec("requests", "Special requests", "textarea", required=False)),
                     multiplier="nights", total_label="Total price"),
            c.travel, rating_scale=10, value_suffix="per night",
        ),
        DomainSpec(
            "news", "news", "article", "articles", "Read time", "Section",
            ("shortest", "longest"), ("Author", "Published"), ("Author", "Published"),
            ("Courier", "Gazette", "Chronicle", "Herald", "Observer"),
            ("News you can trust, every morning", "Local stories, told well"),
            ("Story tip", "Correction", "Subscription", "Something else"),
            FlowSpec("letters", "Write a letter to the editor", "Letter to the editor",
                     "Review your letter", "Letter received", "Letter reference",
                     (NAME, EMAIL, FieldSpec("town", "Town"),
                      FieldSpec("age", "Age", "int", low=16, high=120),
                      FieldSpec("letter", "Your letter", "textarea"))),
            c.news, value_suffix="read", date_sort=("Newest first", True),
        ),
        DomainSpec(
            "government", "gov", "service", "services", "Fee", "Department",
            ("cheapest", "most expensive"), ("Processing time",),
            ("Processing time", "Application method", "Documents required"), ("Council",),
            ("Council services, online", "Find a service, apply in minutes"),
            ("Council tax", "Waste and recycling", "Complaint", "Something else"),
            FlowSpec("apply", "Start your application", "Apply online", "Check your answers",
                     "Application submitted", "Application reference",
                     (NAME, EMAIL,
                      FieldSpec("birth_date", "Date of birth", "date", low="1900-01-01",
                                high="2010-06-01", hint="YYYY-MM-DD"),
                      FieldSpec("household", "People in your household", "int", low=1, high=12),
                      FieldSpec("postcode", "Postcode", "postcode"))),
            c.government,
        ),
        DomainSpec(
            "recipes", "recipes", "recipe", "recipes", "Total time", "Cuisine",
            ("quickest", "slowest"), ("Difficulty",),
            ("Difficulty", "Calories per serving", "Cook time"),
            ("Kitchen", "Recipes", "Table", "Pantry"),
            ("Cook something good tonight", "Tested recipes for every day"),
            ("Recipe question", "Cookbook order", "Partnerships", "Something else"),
            FlowSpec("rate", "Rate this recipe", "Rate this recipe", "Review your rating",
                     "Rating published", "Rating reference",
                     (NAME, EMAIL, FieldSpec("stars", "Stars", "int", low=1, high=5),
                      FieldSpec("cooked_for", "Cooked for (people)", "int", low=1, high=20),
                      FieldSpec("comment", "Comment", "textarea", required=False))),
            c.recipes, rating_scale=5,
        ),
        DomainSpec(
            "jobs", "jobs", "job", "jobs", "Salary", "Category",
            ("lowest-paid", "best-paid"), ("Company", "Location"),
            ("Company", "Location", "Contract type"), ("Careers", "Jobs", "Talent"),
            ("Find work you care about", "Thousands of roles, one search"),
            ("Employer question", "Account help", "Report a listing", "Something else"),
            FlowSpec("apply", "Apply for this job", "Apply for this job",
                     "Review your application", "Application sent", "Application reference",
                     (NAME, EMAIL,
                      FieldSpec("experience", "Years of experience", "int", low=0, high=50),
                      FieldSpec("phone", "Phone number", required=False),
                      FieldSpec("cover", "Cover letter", "textarea", required=False))),
            c.jobs, value_suffix="a year", date_sort=("Newest first", True),
        ),
        DomainSpec(
            "real_estate", "homes", "property", "properties", "Price", "Property type",
            ("cheapest", "most expensive"), ("Bedrooms", "Neighbourhood"),
            ("Neighbourhood", "Year built", "Floor area"),
            ("Realty", "Homes", "Estates"),
            ("Find the place you'll call home", "Homes for sale across the region"),
            ("Selling a home", "Valuation", "Mortgage advice", "Something else"),
            FlowSpec("viewing", "Request a viewing", "Request a viewing",
                     "Review your request", "Viewing requested", "Viewing reference",
                     (NAME, EMAIL, FieldSpec("phone", "Phone number", required=False),
                      FieldSpec("date", "Preferred date", "date", **WHEN),
                      FieldSpec("people", "People attending", "int", low=1, high=6))),
            c.real_estate,
        ),
        DomainSpec(
            "events", "events", "event", "events", "Ticket price", "Type",
            ("cheapest", "most expensive"), ("Date", "Venue"), ("Date", "Venue", "Time"),
            ("Tickets", "Live", "Events"),
            ("What's on this season", "Live music, theatre and more"),
            ("My tickets", "Refunds", "Accessibility", "Something else"),
            FlowSpec("tickets", "Get tickets", "Get tickets", "Review your order",
                     "Tickets booked", "Ticket reference",
                     (FieldSpec("tickets", "Tickets", "int", low=1, high=10), NAME, EMAIL,
                      FieldSpec("phone", "Phone number", required=False)),
                     multiplier="tickets", total_label="Total price"),
            c.events, date_sort=("Soonest first", False),
        ),
    )
}  # fmt: skip

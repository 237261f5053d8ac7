"""Word lists the generator draws from. Data only: no logic, no randomness.

Lists are tuples so nothing can change them; the generator's determinism depends on their order.
"""

from __future__ import annotations

# Site names: one word of each list, e.g. "Bright" + "Kettle"; towns: prefix + suffix, "Ashford".
NAME_FIRST = (
    "Bright", "Blue", "Copper", "Silver", "Amber", "Cedar", "Maple", "North", "Golden", "Quiet",
    "Swift", "Willow", "Harbor", "Juniper", "Linden", "Saffron", "Indigo", "Coral", "Hazel",
    "Marble", "Summit", "Velvet", "Meadow", "Aspen", "Birch", "Crimson", "Ivory", "Lunar",
    "Pine", "Rowan", "Sable", "Tidal", "Urban", "Wild", "Yellow", "Falcon", "Granite", "Honey",
)  # fmt: skip
NAME_SECOND = (
    "Kettle", "Lantern", "Meadow", "River", "Stone", "Finch", "Orchard", "Bridge", "Harbor",
    "Compass", "Anchor", "Fern", "Feather", "Garden", "Hollow", "Island", "Ledger", "Market",
    "Oak", "Pebble", "Quill", "Ridge", "Sparrow", "Thistle", "Valley", "Wharf", "Beacon", "Cove",
    "Dune", "Ember", "Grove", "Heron", "Maple", "Otter", "Prairie", "Spruce", "Tower", "Wren",
)  # fmt: skip
TOWN_PREFIX = (
    "Ash", "Mill", "River", "Oak", "Stone", "Elm", "Fair", "Green", "Brook", "Clay", "Wood",
    "Kings", "Marsh", "Red", "West", "East", "North", "Bright", "Cold", "Hazel", "Lark", "Pine",
)  # fmt: skip
TOWN_SUFFIX = (
    "ford", "brook", "ton", "field", "bury", "wick", "haven", "mere", "dale", "stead", "port",
    "ley", "worth", "bridge", "gate", "moor", "well", "combe",
)  # fmt: skip

PEOPLE_FIRST = (
    "Ada", "Ben", "Carla", "Dev", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kemi",
    "Leo", "Maya", "Nikhil", "Olga", "Pedro", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera",
    "Wei", "Ximena", "Yusuf", "Zoe", "Amara", "Bruno", "Chloe", "Diego", "Esther", "Felix",
)  # fmt: skip
PEOPLE_LAST = (
    "Park", "Okafor", "Novak", "Silva", "Haddad", "Lindqvist", "Moreau", "Tanaka", "Kowalski",
    "Mensah", "Rossi", "Fischer", "Ahmed", "Costa", "Byrne", "Ivanova", "Nakamura", "Olsen",
    "Patel", "Reyes", "Schmidt", "Torres", "Varga", "Walsh", "Yilmaz", "Zhang", "Dubois", "Evans",
)  # fmt: skip
STREETS = (
    "Maple Avenue", "Station Road", "Church Street", "Mill Lane", "Victoria Road", "Park Crescent",
    "Orchard Way", "High Street", "Riverside Walk", "Cedar Close", "Elm Grove", "Harbor View",
    "Kingfisher Drive", "Quarry Hill", "Willow Court", "Market Square", "Beacon Terrace",
    "Chapel Row", "Foundry Lane", "Meadow Rise", "North Parade", "Linden Gardens", "Tanner Street",
)  # fmt: skip

# Shopping: category -> (product nouns, (lowest price, highest price)).
PRODUCTS = {
    "Kitchen": (
        ("Kettle", "Toaster", "Blender", "Coffee Grinder", "Chef's Knife", "Frying Pan",
         "Stockpot", "Cutting Board", "Teapot", "Stand Mixer"),
        (9, 420),
    ),
    "Electronics": (
        ("Headphones", "Bluetooth Speaker", "Smartwatch", "Webcam", "Keyboard", "Wireless Mouse",
         "Power Bank", "USB-C Hub", "E-Reader", "4K Monitor", "Laptop"),
        (19, 1899),
    ),
    "Outdoor": (
        ("Backpack", "Tent", "Sleeping Bag", "Water Bottle", "Trekking Poles", "Camping Stove",
         "Headlamp", "Rain Jacket", "Hammock"),
        (12, 640),
    ),
    "Home Decor": (
        ("Throw Blanket", "Table Lamp", "Wall Clock", "Plant Pot", "Cushion", "Rug", "Vase",
         "Candle Set", "Bookshelf"),
        (8, 520),
    ),
    "Fitness": (
        ("Yoga Mat", "Dumbbell Set", "Jump Rope", "Foam Roller", "Resistance Bands",
         "Kettlebell", "Exercise Bike"),
        (7, 1290),
    ),
}  # fmt: skip
PRODUCT_STYLES = (
    "Classic", "Compact", "Deluxe", "Pro", "Ultra", "Essential", "Nordic", "Everyday", "Premium",
    "Lite", "Max", "Eco", "Studio", "Voyager", "Prime", "Aero", "Heritage", "Flex",
)  # fmt: skip
BRANDS = (
    "Northwind", "Lumora", "Kestrel", "Brightwell", "Oakhaven", "Velto", "Zenith", "Halcyon",
    "Pinecrest", "Solace", "Tundra", "Corvid", "Alder", "Mistral", "Quarto", "Rivet", "Saltire",
)  # fmt: skip
COLOURS = (
    "Black", "White", "Silver", "Navy", "Forest Green", "Charcoal", "Red", "Sand", "Sky Blue",
    "Graphite", "Olive", "Copper", "Mustard", "Teal", "Blush Pink",
)  # fmt: skip
PRODUCT_TRAITS = (
    "built to last", "easy to clean", "designed for small spaces", "backed by a two-year warranty",
    "made from recycled materials", "lightweight and sturdy", "quiet in use",
    "ready out of the box",
)  # fmt: skip

# Travel: hotels by city.
CITIES = (
    "Lisbon", "Kyoto", "Vancouver", "Marrakesh", "Reykjavik", "Buenos Aires", "Cape Town",
    "Prague", "Hanoi", "Edinburgh", "Seville", "Melbourne",
)  # fmt: skip
HOTEL_PATTERNS = ("Hotel {w}", "The {w} Inn", "Casa {w}", "{w} Suites", "{w} Lodge", "{w} House")
HOTEL_WORDS = (
    "Aurora", "Meridian", "Lumen", "Harbor", "Solstice", "Ivy", "Cypress", "Atlas", "Marigold",
    "Palisade", "Orion", "Bellavista", "Juniper", "Riviera", "Calypso", "Larkspur", "Terrace",
    "Magnolia", "Azure", "Alcove", "Drift", "Olive Tree", "Lighthouse", "Citadel", "Lotus",
)  # fmt: skip
AMENITIES = (
    "Free Wi-Fi", "Pool", "Breakfast included", "Gym", "Spa", "Airport shuttle", "Parking",
    "Pet friendly", "Rooftop bar", "Air conditioning", "Kitchenette", "24-hour front desk",
)  # fmt: skip
NEIGHBOURHOODS = (
    "Old Town", "Harborside", "University Quarter", "Riverside", "Market District", "Hillcrest",
    "Arts Quarter", "Station Quarter", "Garden District", "Waterfront",
)  # fmt: skip

# News.
SECTIONS = ("World", "Politics", "Business", "Technology", "Science", "Health", "Sport", "Culture")
HEADLINE_SUBJECTS = {
    "World": ("Coastal nations", "Aid agencies", "Border towns", "Island states", "Envoys"),
    "Politics": ("The council", "Ministers", "Opposition leaders", "Voters", "The assembly"),
    "Business": ("Local bakeries", "Shipping firms", "Start-ups", "Retailers", "Exporters"),
    "Technology": ("Chip makers", "App developers", "Robotics labs", "Open-source teams"),
    "Science": ("Astronomers", "Marine biologists", "Geologists", "Physicists", "Botanists"),
    "Health": ("Hospitals", "Nurses", "Pharmacists", "Sleep researchers", "Clinics"),
    "Sport": ("The city rowing club", "Marathon runners", "The national side", "Cyclists"),
    "Culture": ("The city museum", "Street artists", "Independent cinemas", "Poets", "Choirs"),
}  # fmt: skip
HEADLINE_VERBS = (
    "back plan for", "warn of delays to", "unveil", "rethink", "celebrate", "push for",
    "report record interest in", "debate", "test", "call time on", "expand", "pause",
)  # fmt: skip
HEADLINE_OBJECTS = (
    "new cycling lanes", "a four-day week", "night trains", "solar rooftops", "a river clean-up",
    "free school meals", "open data rules", "a harbor festival", "rent caps", "electric ferries",
    "a digital library", "late-night buses", "community gardens", "a tidal power pilot",
    "heat pump grants", "a youth orchestra", "shorter waiting lists", "quiet hours downtown",
)  # fmt: skip

# Government services by department: (actions, objects).
SERVICES = {
    "Transport": (("Apply for", "Renew", "Replace"),
                  ("a driving licence", "a parking permit", "a bus pass", "a taxi licence")),
    "Housing": (("Apply for", "Report", "Request"),
                ("council housing", "a repair", "a housing grant", "a noise complaint review")),
    "Taxes": (("Pay", "Appeal", "Register for"),
              ("council tax", "a business rate", "a tax reduction", "a payment plan")),
    "Business": (("Register", "Renew", "Apply for"),
                 ("a business name", "a street trading licence", "a food hygiene rating",
                  "a market stall")),
    "Family": (("Apply for", "Request", "Register"),
               ("a school place", "a birth certificate copy", "childcare support",
                "a marriage certificate copy")),
    "Identity": (("Apply for", "Renew", "Update"),
                 ("a resident card", "a passport", "an address record", "a voter registration")),
    "Environment": (("Book", "Report", "Request"),
                    ("a bulky waste collection", "fly-tipping", "a recycling bin",
                     "a tree inspection")),
}  # fmt: skip
DOCUMENTS = (
    "Proof of address", "Photo ID", "Birth certificate", "Bank statement", "Passport photo",
    "Utility bill", "Tenancy agreement", "Payslip",
)  # fmt: skip
ELIGIBILITY = (
    "Residents aged 18 or over", "Anyone living in the district", "Registered businesses",
    "Parents or legal guardians", "Property owners and tenants", "Residents aged 16 or over",
)  # fmt: skip

# Recipes by cuisine: (dishes, mains).
CUISINES = {
    "Italian": ("Risotto", "Pasta Bake", "Gnocchi", "Minestrone", "Focaccia"),
    "Mexican": ("Tacos", "Enchiladas", "Quesadillas", "Pozole", "Burrito Bowl"),
    "Indian": ("Curry", "Dal", "Biryani", "Tikka", "Korma"),
    "Japanese": ("Ramen", "Donburi", "Katsu", "Udon Soup", "Onigiri"),
    "Thai": ("Green Curry", "Noodle Salad", "Stir-Fry", "Satay", "Tom Yum"),
    "French": ("Gratin", "Galette", "Cassoulet", "Tart", "Ratatouille"),
    "Middle Eastern": ("Shakshuka", "Flatbread", "Tagine", "Falafel Wrap", "Pilaf"),
    "Greek": ("Souvlaki", "Moussaka", "Spanakopita", "Orzo Salad", "Gyros"),
    "Korean": ("Bibimbap", "Japchae", "Kimchi Fried Rice", "Bulgogi", "Pancakes"),
}  # fmt: skip
RECIPE_MAINS = (
    "Chickpea", "Chicken", "Salmon", "Mushroom", "Lentil", "Beef", "Tofu", "Prawn", "Aubergine",
    "Spinach", "Sweet Potato", "Lamb", "Halloumi", "Squash", "Pork", "Cauliflower",
)  # fmt: skip
RECIPE_STYLES = (
    "Smoky", "Lemon Garlic", "Crispy", "One-Pot", "Spicy", "Herby", "Creamy", "Charred",
    "Sticky", "Weeknight", "Golden", "Zesty", "Slow-Cooked", "Honey Chilli",
)  # fmt: skip
INGREDIENTS = (
    "2 tbsp olive oil", "3 cloves garlic", "1 onion", "1 thumb fresh ginger", "1 tsp chilli flakes",
    "400 g tinned tomatoes", "1 lemon", "1 bunch coriander", "1 bunch parsley", "2 tsp cumin",
    "1 tsp smoked paprika", "2 tbsp soy sauce", "400 ml coconut milk", "200 g rice",
    "4 spring onions", "30 g butter", "2 tbsp plain flour", "2 eggs", "100 g feta",
    "150 g yoghurt", "1 tbsp honey", "black pepper", "sea salt", "500 ml vegetable stock",
    "100 g spinach", "1 handful mint", "1 tsp sesame oil", "1 lime", "100 ml cream",
    "40 g parmesan",
)  # fmt: skip
METHOD_STEPS = (
    "Heat the oil in a large pan over a medium heat.", "Chop the vegetables into even pieces.",
    "Fry the onion and garlic until soft and golden.", "Stir in the spices and cook for a minute.",
    "Add the main ingredient and brown it on all sides.",
    "Pour in the liquid and bring to a simmer.",
    "Cover and cook gently, stirring now and then.", "Season to taste and rest for five minutes.",
    "Scatter over the herbs and serve straight away.", "Bake until bubbling and browned on top.",
)  # fmt: skip

# Jobs.
JOB_FIELDS = {
    "Engineering": ("Software Engineer", "Backend Developer", "DevOps Engineer", "QA Engineer",
                    "Mobile Developer", "Site Reliability Engineer"),
    "Design": ("Product Designer", "UX Researcher", "Graphic Designer", "Illustrator"),
    "Marketing": ("Marketing Manager", "Content Writer", "SEO Specialist", "Brand Strategist"),
    "Sales": ("Account Executive", "Sales Representative", "Partnerships Manager"),
    "Finance": ("Accountant", "Financial Analyst", "Payroll Officer", "Auditor"),
    "Data": ("Data Analyst", "Data Engineer", "Machine Learning Engineer", "Data Scientist"),
    "Operations": ("Operations Manager", "Logistics Coordinator", "Office Manager"),
    "Customer Support": ("Support Specialist", "Customer Success Manager", "Help Desk Analyst"),
    "Healthcare": ("Staff Nurse", "Pharmacy Technician", "Physiotherapist", "Care Assistant"),
    "Education": ("Maths Teacher", "Teaching Assistant", "Curriculum Developer", "Librarian"),
}  # fmt: skip
SENIORITY = ("Junior", "Senior", "Lead", "Principal", "Graduate", "Associate", "Staff")
COMPANY_SUFFIX = ("Labs", "Group", "Systems", "& Co", "Partners", "Health", "Works", "Studio")
CONTRACTS = ("Full-time", "Part-time", "Contract", "Temporary", "Internship")

# Real estate.
PROPERTY_TYPES = {
    "Apartment": ((1, 3), (180_000, 650_000)),
    "House": ((2, 5), (320_000, 1_450_000)),
    "Townhouse": ((2, 4), (290_000, 890_000)),
    "Studio": ((1, 1), (120_000, 310_000)),
    "Cottage": ((2, 3), (240_000, 720_000)),
    "Loft": ((1, 2), (260_000, 780_000)),
}  # fmt: skip
PROPERTY_FEATURES = (
    "south-facing garden", "open-plan kitchen", "private parking", "balcony with views",
    "recently renovated bathroom", "walk-in wardrobe", "home office", "wood-burning stove",
    "close to the station", "high ceilings", "off-street parking", "new double glazing",
)  # fmt: skip
ENERGY_RATINGS = ("A", "B", "C", "D", "E")

# Events.
EVENT_KINDS = {
    "Concert": ("Jazz Night", "Symphony Evening", "Indie Showcase", "Choir Gala", "Folk Session"),
    "Theatre": ("Premiere", "Matinee", "Shakespeare in the Park", "Musical Revue", "Play Reading"),
    "Comedy": ("Stand-up Night", "Improv Hour", "Comedy Club Special", "Sketch Show"),
    "Sport": ("Derby", "Cup Final", "Half Marathon", "Open Championship", "Exhibition Match"),
    "Festival": ("Food Festival", "Lantern Festival", "Film Festival", "Book Fair", "Street Fair"),
    "Workshop": ("Pottery Workshop", "Bread Masterclass", "Photo Walk", "Coding Bootcamp"),
    "Exhibition": ("Photography Exhibition", "Design Week", "Science Expo", "Craft Market"),
}  # fmt: skip
EVENT_ADJECTIVES = (
    "Midnight", "Spring", "Summer", "Harvest", "Riverside", "Grand", "Open Air", "Late",
    "Winter", "Autumn", "Sunset", "Downtown", "Starlight", "Community", "Annual", "Twilight",
)  # fmt: skip
VENUE_WORDS = ("Hall", "Arena", "Playhouse", "Pavilion", "Theatre", "Gardens", "Exchange", "Dome")
